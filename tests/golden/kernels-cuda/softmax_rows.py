MAX_THREADS = 1024          # (threads per block at most: its shared arrays' size)
ROW_THREADS = 128          # (threads per row: 1 row elements each in registers)


# k0_max_sub_exp_sum_div: reduce kernel, domain [2,128]
def kernel(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    nrows = n0
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_max = cuda.shared.array(32, np.float32)
    shared_sum = cuda.shared.array(32, np.float64)
    lane = tid % 32
    warp = tid // 32
    row = cuda.blockIdx.x
    while row < nrows:
        i0 = row
        t0 = tid
        i1_0 = t0
        r0 = in0_x[i0, i1_0]
        # %max = max %x {axes=[1], keepdims=true} : f32[2,1] loc(...)
        acc_max = np.float32(-np.inf)
        t = tid
        t0 = t
        i1_0 = t0
        x0_max = r0
        acc_max = (x0_max if (x0_max > acc_max) | (x0_max != x0_max) else acc_max)
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
        # %sum = sum %exp {axes=[1], keepdims=true} : f32[2,1] loc(...)
        acc_sum = np.float64(0.0)
        t = tid
        t0 = t
        i1_0 = t0
        # %sub = sub %x, %max : f32[2,128] loc(...)
        v0_sub = np.float32((r0 - v_max))
        # %exp = exp %sub : f32[2,128] loc(...)
        v0_exp = np.float32(math.exp(v0_sub))
        x0_sum = np.float64(v0_exp)
        acc_sum = (acc_sum + x0_sum)
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
        t = tid
        t0 = t
        i1_0 = t0
        # %sub = sub %x, %max : f32[2,128] loc(...)
        v0_sub = np.float32((r0 - v_max))
        # %exp = exp %sub : f32[2,128] loc(...)
        v0_exp = np.float32(math.exp(v0_sub))
        # %div = div %exp, %sum : f32[2,128] loc(...)
        v0_div = np.float32((v0_exp / v_sum))
        out0[i0, i1_0] = v0_div
        row += cuda.gridDim.x


def launch(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    if n1 != 128:      # (its rows are in registers: this length only)
        raise ValueError(f'kernel k0_max_sub_exp_sum_div holds rows of 128: got {n1}')
    return (n0, n1)
