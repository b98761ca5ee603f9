MAX_THREADS = 1024          # (threads per block at most: its shared arrays' size)
PARTS = 1024, 16384, 256      # (the domain in parts: at most, elements each at least, threads a block)


# k0_sum: reduce kernel, domain [100]
def kernel(in0_x, out0, partials_sum, done):
    n0 = in0_x.shape[0]
    ninner = n0
    nrows = 1
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_sum = cuda.shared.array(32, np.float64)
    lane = tid % 32
    warp = tid // 32
    last = cuda.shared.array(1, np.int32)
    part = cuda.blockIdx.x
    nparts = cuda.gridDim.x
    low = part * ninner // nparts          # (this block's stretch of the domain)
    high = (part + 1) * ninner // nparts
    # %sum = sum %x {axes=[0]} : f32[] loc(...)
    acc_sum = np.float64(0.0)
    t = low + tid
    while t + 3 * nthreads < high:     # (4 elements a trip: every load issued before the first store)
        t0 = t
        i0_0 = t0
        t1 = t + nthreads
        i0_1 = t1
        t2 = t + 2 * nthreads
        i0_2 = t2
        t3 = t + 3 * nthreads
        i0_3 = t3
        e1 = in0_x[i0_0]
        e2 = in0_x[i0_1]
        e3 = in0_x[i0_2]
        e4 = in0_x[i0_3]
        x0_sum = np.float64(e1)
        x1_sum = np.float64(e2)
        x2_sum = np.float64(e3)
        x3_sum = np.float64(e4)
        acc_sum = (acc_sum + x0_sum)
        acc_sum = (acc_sum + x1_sum)
        acc_sum = (acc_sum + x2_sum)
        acc_sum = (acc_sum + x3_sum)
        t += 4 * nthreads
    while t < high:
        i0 = t
        x_sum = np.float64(in0_x[i0])
        acc_sum = (acc_sum + x_sum)
        t += nthreads
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
    cuda.syncthreads()         # (every warp has read the partials before the next reuse)
    if tid == 0:
        partials_sum[part] = acc_sum
        cuda.threadfence()         # (the partials are visible before the count says so)
        last[0] = cuda.atomic.add(done, 0, 1) == nparts - 1
        cuda.threadfence()         # (and the other blocks' partials are read after the count)
    cuda.syncthreads()
    if last[0]:                   # the last block combines the partials, in order
        acc_sum = np.float64(0.0)
        t = tid
        while t < nparts:
            acc_sum = (acc_sum + partials_sum[t])
            t += nthreads
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
        if tid == 0:
            out0[0] = v_sum


def launch(in0_x, out0, *parts):
    n0 = in0_x.shape[0]
    return (1, n0)
