MAX_THREADS = 128          # (threads per block at most: its shared arrays' size)
ROW_THREADS = 32          # (threads per row: 1 row elements each in registers)


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
        t0 = min(tid, ninner - 1)
        i1_0 = t0
        r0 = in0_x[i0, i1_0]
        # %argmax = argmax %x {axis=1} : i64[4] loc(...)
        acc_argmax = np.float32(-np.inf)
        at_argmax = -1
        t = tid
        t0 = t
        i1_0 = t0
        x0_argmax = r0
        if t0 < ninner:
            if fj.arg_prefer(acc_argmax, at_argmax, x0_argmax, t0, True):
                acc_argmax = x0_argmax
                at_argmax = t0
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
    if n1 != 8:      # (its rows are in registers: this length only)
        raise ValueError(f'kernel k0_argmax holds rows of 8: got {n1}')
    return (n0, n1)
