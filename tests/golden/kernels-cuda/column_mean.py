MAX_THREADS = 1024          # (threads per block at most: its shared arrays' size)


# k0_mean: reduce kernel, domain [4,8]
def kernel(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n0
    nrows = n1
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_mean = cuda.shared.array(32, np.float64)
    lane = tid % 32
    warp = tid // 32
    row = cuda.blockIdx.x
    while row < nrows:
        i1 = row
        # %mean = mean %x {axes=[0]} : f32[8] loc(...)
        acc_mean = np.float64(0.0)
        t = tid
        while t + 3 * nthreads < ninner:     # (4 elements a trip: every load issued before the first store)
            t0 = t
            i0_0 = t0
            x_mean_0 = np.float64(in0_x[i0_0, i1])
            t1 = t + nthreads
            i0_1 = t1
            x_mean_1 = np.float64(in0_x[i0_1, i1])
            t2 = t + 2 * nthreads
            i0_2 = t2
            x_mean_2 = np.float64(in0_x[i0_2, i1])
            t3 = t + 3 * nthreads
            i0_3 = t3
            x_mean_3 = np.float64(in0_x[i0_3, i1])
            acc_mean = (acc_mean + x_mean_0)
            acc_mean = (acc_mean + x_mean_1)
            acc_mean = (acc_mean + x_mean_2)
            acc_mean = (acc_mean + x_mean_3)
            t += 4 * nthreads
        while t < ninner:
            i0 = t
            x_mean = np.float64(in0_x[i0, i1])
            acc_mean = (acc_mean + x_mean)
            t += nthreads
        other = fj.shfl_xor(acc_mean, 16)
        acc_mean = (acc_mean + other)
        other = fj.shfl_xor(acc_mean, 8)
        acc_mean = (acc_mean + other)
        other = fj.shfl_xor(acc_mean, 4)
        acc_mean = (acc_mean + other)
        other = fj.shfl_xor(acc_mean, 2)
        acc_mean = (acc_mean + other)
        other = fj.shfl_xor(acc_mean, 1)
        acc_mean = (acc_mean + other)
        if lane == 0:
            shared_mean[warp] = acc_mean
        cuda.syncthreads()
        acc_mean = shared_mean[lane] if lane < nthreads // 32 else np.float64(0.0)
        other = fj.shfl_xor(acc_mean, 16)
        acc_mean = (acc_mean + other)
        other = fj.shfl_xor(acc_mean, 8)
        acc_mean = (acc_mean + other)
        other = fj.shfl_xor(acc_mean, 4)
        acc_mean = (acc_mean + other)
        other = fj.shfl_xor(acc_mean, 2)
        acc_mean = (acc_mean + other)
        other = fj.shfl_xor(acc_mean, 1)
        acc_mean = (acc_mean + other)
        v_mean = np.float32((acc_mean / np.float64(ninner)))
        cuda.syncthreads()         # (every warp has read the partials before the next reuse)
        if tid == 0:
            out0[i1] = v_mean
        row += cuda.gridDim.x


def launch(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    return (n1, n0)
