MAX_THREADS = 1024          # (threads per block at most: its shared arrays' size)
ROW_THREADS = 32          # (threads per row: 1 row elements each in registers)


# k0_sum_max: reduce kernel, domain [4,8]
def kernel(in0_x, out0, out1):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    nrows = n0
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_sum = cuda.shared.array(32, np.float64)
    shared_max = cuda.shared.array(32, np.float32)
    lane = tid % 32
    warp = tid // 32
    row = cuda.blockIdx.x
    while row < nrows:
        i0 = row
        t0 = min(tid, ninner - 1)
        i1_0 = t0
        r0 = in0_x[i0, i1_0]
        # %sum = sum %x {axes=[1]} : f32[4] loc(...)
        acc_sum = np.float64(0.0)
        # %max = max %x {axes=[1]} : f32[4] loc(...)
        acc_max = np.float32(-np.inf)
        t = tid
        t0 = t
        i1_0 = t0
        x0_sum = np.float64(r0)
        x0_max = r0
        if t0 < ninner:
            acc_sum = (acc_sum + x0_sum)
            acc_max = (x0_max if (x0_max > acc_max) | (x0_max != x0_max) else acc_max)
        other = fj.shfl_xor(acc_sum, 16)
        acc_sum = (acc_sum + other)
        other = fj.shfl_xor(acc_sum, 8)
        acc_sum = (acc_sum + other)
        other = fj.shfl_xor(acc_sum, 4)
        acc_sum = (acc_sum + other)
        other = fj.shfl_xor(acc_sum, 2)
        acc_sum = (acc_sum + other)
        other = fj.shfl_xor(acc_sum, 1)
        acc_sum = (acc_sum + other)
        if lane == 0:
            shared_sum[warp] = acc_sum
        cuda.syncthreads()
        acc_sum = shared_sum[lane] if lane < nthreads // 32 else np.float64(0.0)
        other = fj.shfl_xor(acc_sum, 16)
        acc_sum = (acc_sum + other)
        other = fj.shfl_xor(acc_sum, 8)
        acc_sum = (acc_sum + other)
        other = fj.shfl_xor(acc_sum, 4)
        acc_sum = (acc_sum + other)
        other = fj.shfl_xor(acc_sum, 2)
        acc_sum = (acc_sum + other)
        other = fj.shfl_xor(acc_sum, 1)
        acc_sum = (acc_sum + other)
        v_sum = np.float32(acc_sum)
        cuda.syncthreads()         # (every warp has read the partials before the next reuse)
        other = fj.shfl_xor(acc_max, 16)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        other = fj.shfl_xor(acc_max, 8)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        other = fj.shfl_xor(acc_max, 4)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        other = fj.shfl_xor(acc_max, 2)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        other = fj.shfl_xor(acc_max, 1)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        if lane == 0:
            shared_max[warp] = acc_max
        cuda.syncthreads()
        acc_max = shared_max[lane] if lane < nthreads // 32 else np.float32(-np.inf)
        other = fj.shfl_xor(acc_max, 16)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        other = fj.shfl_xor(acc_max, 8)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        other = fj.shfl_xor(acc_max, 4)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        other = fj.shfl_xor(acc_max, 2)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        other = fj.shfl_xor(acc_max, 1)
        acc_max = (other if (other > acc_max) | (other != other) else acc_max)
        v_max = acc_max
        cuda.syncthreads()         # (every warp has read the partials before the next reuse)
        if tid == 0:
            out0[i0] = v_sum
            out1[i0] = v_max
        row += cuda.gridDim.x


def launch(in0_x, out0, out1):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    if n1 != 8:      # (its rows are in registers: this length only)
        raise ValueError(f'kernel k0_sum_max holds rows of 8: got {n1}')
    return (n0, n1)
