# k0_sum_max: reduce kernel, domain [4,8]
def kernel(in0_x, out0, out1):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    nrows = n0
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_sum = cuda.shared.array(128, np.float64)
    shared_max = cuda.shared.array(128, np.float32)
    for row in range(cuda.blockIdx.x, nrows, cuda.gridDim.x):
        i0 = row
        # %sum = sum %x {axes=[1]} : f32[4] loc(...)
        acc_sum = np.float64(0.0)
        # %max = max %x {axes=[1]} : f32[4] loc(...)
        acc_max = np.float32(-np.inf)
        for t in range(tid, ninner, nthreads):
            i1 = t
            x = np.float64(in0_x[i0, i1])
            acc_sum = (acc_sum + x)
            x = in0_x[i0, i1]
            acc_max = (x if (x > acc_max) | (x != x) else acc_max)
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
        if tid == 0:
            out0[i0] = v_sum
            out1[i0] = v_max


def launch(in0_x, out0, out1):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    return (n0, n1)
