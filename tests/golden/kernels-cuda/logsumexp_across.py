MAX_THREADS = 1024          # (threads per block at most: its shared arrays' size)
ROW_THREADS = 32          # (threads per row: 1 row elements each in registers)


# k0_max_sub_exp_sum_log: reduce kernel, domain [20,7]
def kernel(in0_x, out0, out1):
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
        t0 = min(tid, ninner - 1)
        i1_0 = t0
        r0 = in0_x[i0, i1_0]
        # %max = max %x {axes=[1], keepdims=true} : f32[20,1] loc(...)
        acc_max = np.float32(-np.inf)
        t = tid
        t0 = t
        i1_0 = t0
        x0_max = r0
        if t0 < ninner:
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
        # %sum = sum %exp {axes=[1]} : f32[20] loc(...)
        acc_sum = np.float64(0.0)
        t = tid
        t0 = t
        i1_0 = t0
        # %sub = sub %x, %max : f32[20,7] loc(...)
        v0_sub = np.float32((r0 - v_max))
        # %exp = exp %sub : f32[20,7] loc(...)
        v0_exp = np.float32(math.exp(v0_sub))
        x0_sum = np.float64(v0_exp)
        if t0 < ninner:
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
        # %log = log %sum : f32[20] loc(...)
        v_log = np.float32(math.log(v_sum))
        if tid == 0:
            out0[i0, 0] = v_max
            out1[i0] = v_log
        row += cuda.gridDim.x


def launch(in0_x, out0, out1):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    if n1 != 7:      # (its rows are in registers: this length only)
        raise ValueError(f'kernel k0_max_sub_exp_sum_log holds rows of 7: got {n1}')
    return (n0, n1)


# k1_add: loop kernel, domain [20]
def kernel(in0_log, in1_reshape, out0):
    n0 = in0_log.shape[0]
    total = n0
    flat = cuda.grid(1)
    stride = cuda.gridsize(1)
    while flat + 3 * stride < total:     # (4 elements a trip: every load issued before the first store)
        f0 = flat
        i0_0 = f0
        f1 = flat + stride
        i0_1 = f1
        f2 = flat + 2 * stride
        i0_2 = f2
        f3 = flat + 3 * stride
        i0_3 = f3
        e1 = in0_log[i0_0]
        e2 = in1_reshape[i0_0]
        e3 = in0_log[i0_1]
        e4 = in1_reshape[i0_1]
        e5 = in0_log[i0_2]
        e6 = in1_reshape[i0_2]
        e7 = in0_log[i0_3]
        e8 = in1_reshape[i0_3]
        # %add = add %log, %reshape : f32[20] loc(...)
        v0_add = np.float32((e1 + e2))
        # %add = add %log, %reshape : f32[20] loc(...)
        v1_add = np.float32((e3 + e4))
        # %add = add %log, %reshape : f32[20] loc(...)
        v2_add = np.float32((e5 + e6))
        # %add = add %log, %reshape : f32[20] loc(...)
        v3_add = np.float32((e7 + e8))
        out0[i0_0] = v0_add
        out0[i0_1] = v1_add
        out0[i0_2] = v2_add
        out0[i0_3] = v3_add
        flat += 4 * stride
    while flat < total:            # (a grid-stride loop; range() would divide for its trip count)
        i0 = flat
        # %add = add %log, %reshape : f32[20] loc(...)
        v_add = np.float32((in0_log[i0] + in1_reshape[i0]))
        out0[i0] = v_add
        flat += stride


def launch(in0_log, in1_reshape, out0):
    n0 = in0_log.shape[0]
    return (n0, 1)
