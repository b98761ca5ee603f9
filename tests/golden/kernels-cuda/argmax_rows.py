MAX_THREADS = 1024          # (threads per block at most: its shared arrays' size)
ROW_THREADS = 32          # (threads per row: 1 row elements each in registers)


# k0_argmax: reduce kernel, domain [4,8]
def kernel(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    nrows = n0
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    shared_argmax = cuda.shared.array(32, np.float32)
    shared_at_argmax = cuda.shared.array(32, np.int64)
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
        other = fj.shfl_xor(acc_argmax, 16)
        other_at = fj.shfl_xor(at_argmax, 16)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        other = fj.shfl_xor(acc_argmax, 8)
        other_at = fj.shfl_xor(at_argmax, 8)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        other = fj.shfl_xor(acc_argmax, 4)
        other_at = fj.shfl_xor(at_argmax, 4)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        other = fj.shfl_xor(acc_argmax, 2)
        other_at = fj.shfl_xor(at_argmax, 2)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        other = fj.shfl_xor(acc_argmax, 1)
        other_at = fj.shfl_xor(at_argmax, 1)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        if lane == 0:
            shared_argmax[warp] = acc_argmax
            shared_at_argmax[warp] = at_argmax
        cuda.syncthreads()
        acc_argmax = shared_argmax[lane] if lane < nthreads // 32 else np.float32(-np.inf)
        at_argmax = shared_at_argmax[lane] if lane < nthreads // 32 else -1
        other = fj.shfl_xor(acc_argmax, 16)
        other_at = fj.shfl_xor(at_argmax, 16)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        other = fj.shfl_xor(acc_argmax, 8)
        other_at = fj.shfl_xor(at_argmax, 8)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        other = fj.shfl_xor(acc_argmax, 4)
        other_at = fj.shfl_xor(at_argmax, 4)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        other = fj.shfl_xor(acc_argmax, 2)
        other_at = fj.shfl_xor(at_argmax, 2)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        other = fj.shfl_xor(acc_argmax, 1)
        other_at = fj.shfl_xor(at_argmax, 1)
        if fj.arg_prefer(acc_argmax, at_argmax, other, other_at, True):
            acc_argmax = other
            at_argmax = other_at
        v_argmax = np.int64(at_argmax)
        cuda.syncthreads()         # (every warp has read the partials before the next reuse)
        if tid == 0:
            out0[i0] = v_argmax
        row += cuda.gridDim.x


def launch(in0_x, out0):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    if n1 != 8:      # (its rows are in registers: this length only)
        raise ValueError(f'kernel k0_argmax holds rows of 8: got {n1}')
    return (n0, n1)
