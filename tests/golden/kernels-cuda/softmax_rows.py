# k0_max_sub_exp_sum_div: reduce kernel, domain [2,128]
def kernel(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    nrows = n0
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_max = cuda.shared.array(128, np.float32)
    shared_sum = cuda.shared.array(128, np.float64)
    for row in range(cuda.blockIdx.x, nrows, cuda.gridDim.x):
        i0 = row
        # %max = max %x {axes=[1], keepdims=true} : f32[2,1] loc(...)
        acc_max = np.float32(-np.inf)
        for t in range(tid, ninner, nthreads):
            i1 = t
            x = in0_x[i0, i1]
            acc_max = (x if (x > acc_max) | (x != x) else acc_max)
        shared_max[tid] = acc_max
        cuda.syncthreads()
        step = nthreads // 2
        while step > 0:
            if tid < step:
                shared_max[tid] = (shared_max[tid + step] if (shared_max[tid + step] > shared_max[tid]) | (shared_max[tid + step] != shared_max[tid + step]) else shared_max[tid])
            cuda.syncthreads()
            step //= 2
        v_max = shared_max[0]
        cuda.syncthreads()         # (every thread has read the total before the next reuse)
        # %sum = sum %exp {axes=[1], keepdims=true} : f32[2,1] loc(...)
        acc_sum = np.float64(0.0)
        for t in range(tid, ninner, nthreads):
            i1 = t
            # %sub = sub %x, %max : f32[2,128] loc(...)
            v_sub = np.float32((in0_x[i0, i1] - v_max))
            # %exp = exp %sub : f32[2,128] loc(...)
            v_exp = np.float32(math.exp(v_sub))
            x = np.float64(v_exp)
            acc_sum = (acc_sum + x)
        shared_sum[tid] = acc_sum
        cuda.syncthreads()
        step = nthreads // 2
        while step > 0:
            if tid < step:
                shared_sum[tid] = (shared_sum[tid] + shared_sum[tid + step])
            cuda.syncthreads()
            step //= 2
        v_sum = np.float32(shared_sum[0])
        cuda.syncthreads()         # (every thread has read the total before the next reuse)
        for t in range(tid, ninner, nthreads):
            i1 = t
            # %sub = sub %x, %max : f32[2,128] loc(...)
            v_sub = np.float32((in0_x[i0, i1] - v_max))
            # %exp = exp %sub : f32[2,128] loc(...)
            v_exp = np.float32(math.exp(v_sub))
            # %div = div %exp, %sum : f32[2,128] loc(...)
            v_div = np.float32((v_exp / v_sum))
            out0[i0, i1] = v_div


def launch(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    return (n0, n1)
