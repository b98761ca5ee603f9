# k0_mean: reduce kernel, domain [4,8]
def kernel(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n0
    nrows = n1
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_mean = cuda.shared.array(128, np.float64)
    for row in range(cuda.blockIdx.x, nrows, cuda.gridDim.x):
        i1 = row
        # %mean = mean %x {axes=[0]} : f32[8] loc(...)
        acc_mean = np.float64(0.0)
        for t in range(tid, ninner, nthreads):
            i0 = t
            x = np.float64(in0_x[i0, i1])
            acc_mean = (acc_mean + x)
        shared_mean[tid] = acc_mean
        cuda.syncthreads()
        step = nthreads // 2
        while step > 0:
            if tid < step:
                shared_mean[tid] = (shared_mean[tid] + shared_mean[tid + step])
            cuda.syncthreads()
            step //= 2
        v_mean = np.float32((shared_mean[0] / np.float64(ninner)))
        cuda.syncthreads()         # (every thread has read the total before the next reuse)
        if tid == 0:
            out0[i1] = v_mean


def launch(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    return (n1, n0)
