# k0_sum: reduce kernel, domain [32]
def kernel(in0_x, out0):
    n0 = in0_x.shape[0]
    ninner = n0
    nrows = 1
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_sum = cuda.shared.array(128, np.float64)
    for row in range(cuda.blockIdx.x, nrows, cuda.gridDim.x):
        # %sum = sum %x {axes=[0]} : f32[] loc(...)
        acc_sum = np.float64(0.0)
        for t in range(tid, ninner, nthreads):
            i0 = t
            x = np.float64(in0_x[i0])
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
        if tid == 0:
            out0[0] = v_sum


def launch(in0_x, out0):
    n0 = in0_x.shape[0]
    return (1, n0)
