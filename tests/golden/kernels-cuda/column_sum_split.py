MAX_THREADS = 256          # (threads per block at most: its shared arrays' size)
ROW_THREADS = 256          # (a block: 32 columns by 8 lanes of rows)
PART_SIZES = 128, 2      # (each partial buffer's elements: 2 splits of 2 groups of 32 columns; a count per group)


# k0_mul_sum_max_add: reduce kernel, domain [600,40]
def kernel(in0_x, out0, partials_sum, partials_max, done):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n0
    nrows = n1
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_sum = cuda.shared.array(256, np.float64)
    shared_max = cuda.shared.array(256, np.float32)
    last = cuda.shared.array(1, np.int32)
    lane = tid % 32
    warp = tid // 32
    lanes = nthreads // 32
    ngroups = (nrows + 31) // 32
    nsplits = 2
    work = cuda.blockIdx.x
    while work < ngroups * nsplits:          # (blocks stride over groups of 32 columns, and splits)
        group = work % ngroups
        split = work // ngroups
        row = group * 32 + lane
        live = row < nrows
        i1 = min(row, nrows - 1)
        low = split * ninner // nsplits          # (this split's rows)
        high = (split + 1) * ninner // nsplits if live else low
        # %sum = sum %mul {axes=[0]} : f32[40] loc(...)
        acc_sum = np.float64(0.0)
        # %max = max %x {axes=[0]} : f32[40] loc(...)
        acc_max = np.float32(-np.inf)
        t = low + warp
        while t < high:
            i0 = t
            # %mul = mul %x, %x : f32[600,40] loc(...)
            v_mul = np.float32((in0_x[i0, i1] * in0_x[i0, i1]))
            x_sum = np.float64(v_mul)
            x_max = in0_x[i0, i1]
            acc_sum = (acc_sum + x_sum)
            acc_max = (x_max if (x_max > acc_max) | (x_max != x_max) else acc_max)
            t += lanes
        shared_sum[tid] = acc_sum
        shared_max[tid] = acc_max
        cuda.syncthreads()
        if warp == 0:          # the lanes' totals, in lane order
            w = 1
            while w < lanes:
                acc_sum = (acc_sum + shared_sum[w * 32 + lane])
                acc_max = (shared_max[w * 32 + lane] if (shared_max[w * 32 + lane] > acc_max) | (shared_max[w * 32 + lane] != shared_max[w * 32 + lane]) else acc_max)
                w += 1
            partials_sum[(group * nsplits + split) * 32 + lane] = acc_sum
            partials_max[(group * nsplits + split) * 32 + lane] = acc_max
            cuda.threadfence()         # (the partials are visible before the count says so)
        cuda.syncthreads()
        if tid == 0:
            last[0] = cuda.atomic.add(done, group, 1) == nsplits - 1
            cuda.threadfence()         # (and the other blocks' partials are read after the count)
        cuda.syncthreads()
        if last[0] and warp == 0:          # the last block of the group adds the splits, in order
            acc_sum = partials_sum[group * nsplits * 32 + lane]
            acc_max = partials_max[group * nsplits * 32 + lane]
            s = 1
            while s < nsplits:
                acc_sum = (acc_sum + partials_sum[(group * nsplits + s) * 32 + lane])
                acc_max = (partials_max[(group * nsplits + s) * 32 + lane] if (partials_max[(group * nsplits + s) * 32 + lane] > acc_max) | (partials_max[(group * nsplits + s) * 32 + lane] != partials_max[(group * nsplits + s) * 32 + lane]) else acc_max)
                s += 1
            if live:
                v_sum = np.float32(acc_sum)
                v_max = acc_max
                # %add = add %sum, %max : f32[40] loc(...)
                v_add = np.float32((v_sum + v_max))
                out0[i1] = v_add
        cuda.syncthreads()         # (the first warp has read the totals before the next work)
        work += cuda.gridDim.x


def launch(in0_x, out0, *parts):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    if n1 != 40:      # (its partial buffers hold this many columns' splits)
        raise ValueError(f'kernel k0_mul_sum_max_add reduces 40 columns: got {n1}')
    return (-(-(n1) // 32) * 2, 256)
