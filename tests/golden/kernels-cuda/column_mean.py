MAX_THREADS = 256          # (threads per block at most: its shared arrays' size)
ROW_THREADS = 256          # (a block: 32 columns by 8 lanes of rows)


# k0_mean: reduce kernel, domain [4,8]
def kernel(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n0
    nrows = n1
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_mean = cuda.shared.array(256, np.float64)
    lane = tid % 32
    warp = tid // 32
    lanes = nthreads // 32
    ngroups = (nrows + 31) // 32
    nsplits = 1
    work = cuda.blockIdx.x
    while work < ngroups * nsplits:          # (blocks stride over groups of 32 columns, and splits)
        group = work % ngroups
        split = work // ngroups
        row = group * 32 + lane
        live = row < nrows
        i1 = min(row, nrows - 1)
        low = split * ninner // nsplits          # (this split's rows)
        high = (split + 1) * ninner // nsplits if live else low
        # %mean = mean %x {axes=[0]} : f32[8] loc(...)
        acc_mean = np.float64(0.0)
        t = low + warp
        while t < high:
            i0 = t
            x_mean = np.float64(in0_x[i0, i1])
            acc_mean = (acc_mean + x_mean)
            t += lanes
        shared_mean[tid] = acc_mean
        cuda.syncthreads()
        if warp == 0:          # the lanes' totals, in lane order
            w = 1
            while w < lanes:
                acc_mean = (acc_mean + shared_mean[w * 32 + lane])
                w += 1
            if live:
                v_mean = np.float32((acc_mean / np.float64(ninner)))
                out0[i1] = v_mean
        cuda.syncthreads()         # (the first warp has read the totals before the next work)
        work += cuda.gridDim.x


def launch(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    return (-(-(n1) // 32) * 1, 256)
