MAX_THREADS = 128          # (threads per block at most: its shared arrays' size)


# k0_argmax: reduce kernel, domain [4,8]
def kernel(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    nrows = n0
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_argmax = cuda.shared.array(128, np.float32)
    shared_at_argmax = cuda.shared.array(128, np.int64)
    lane = tid % 32
    warp = tid // 32
    row = cuda.blockIdx.x
    while row < nrows:
        i0 = row
        # %argmax = argmax %x {axis=1} : i64[4] loc(...)
        acc_argmax = np.float32(-np.inf)
        at_argmax = -1
        t = tid
        while t + 3 * nthreads < ninner:     # (4 elements a trip: every load issued before the first store)
            t0 = t
            i1_0 = t0
            x_argmax_0 = in0_x[i0, i1_0]
            t1 = t + nthreads
            i1_1 = t1
            x_argmax_1 = in0_x[i0, i1_1]
            t2 = t + 2 * nthreads
            i1_2 = t2
            x_argmax_2 = in0_x[i0, i1_2]
            t3 = t + 3 * nthreads
            i1_3 = t3
            x_argmax_3 = in0_x[i0, i1_3]
            if fj.arg_prefer(acc_argmax, at_argmax, x_argmax_0, t0, True):
                acc_argmax = x_argmax_0
                at_argmax = t0
            if fj.arg_prefer(acc_argmax, at_argmax, x_argmax_1, t1, True):
                acc_argmax = x_argmax_1
                at_argmax = t1
            if fj.arg_prefer(acc_argmax, at_argmax, x_argmax_2, t2, True):
                acc_argmax = x_argmax_2
                at_argmax = t2
            if fj.arg_prefer(acc_argmax, at_argmax, x_argmax_3, t3, True):
                acc_argmax = x_argmax_3
                at_argmax = t3
            t += 4 * nthreads
        while t < ninner:
            i1 = t
            x_argmax = in0_x[i0, i1]
            if fj.arg_prefer(acc_argmax, at_argmax, x_argmax, t, True):
                acc_argmax = x_argmax
                at_argmax = t
            t += nthreads
        shared_argmax[tid] = acc_argmax
        shared_at_argmax[tid] = at_argmax
        cuda.syncthreads()
        step = nthreads // 2
        while step > 0:
            if tid < step:
                if fj.arg_prefer(shared_argmax[tid], shared_at_argmax[tid], shared_argmax[tid + step], shared_at_argmax[tid + step], True):
                    shared_argmax[tid] = shared_argmax[tid + step]
                    shared_at_argmax[tid] = shared_at_argmax[tid + step]
            cuda.syncthreads()
            step //= 2
        v_argmax = np.int64(shared_at_argmax[0])
        cuda.syncthreads()         # (every thread has read the total before the next reuse)
        if tid == 0:
            out0[i0] = v_argmax
        row += cuda.gridDim.x


def launch(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    return (n0, n1)
