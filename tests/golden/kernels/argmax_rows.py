# k0_argmax: reduce kernel, domain [4,8]
def kernel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in range((n0 + 63) // 64):
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %argmax = argmax %x {axis=1} : i64[4] loc(...)
            total_argmax = np.float32(-np.inf)
            for t in range(ninner):
                x = in0_x[i0, t]
                total_argmax = (x if (x > total_argmax) | (x != x) else total_argmax)
            first = ninner - ninner % 64
            for block in range(ninner // 64):
                hit = False
                for j in range(64):
                    x = in0_x[i0, block * 64 + j]
                    hit = hit | (x == total_argmax) | ((x != x) & (total_argmax != total_argmax))
                if hit:
                    first = block * 64
                    break
            best_index = 0
            for t in range(first, ninner):
                x = in0_x[i0, t]
                if (x == total_argmax) | ((x != x) & (total_argmax != total_argmax)):
                    best_index = t
                    break
            v_argmax = np.int64(best_index)
            out0[i0] = v_argmax


def kernel_parallel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in prange((n0 + 63) // 64):
        fj.vector_width(512)
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %argmax = argmax %x {axis=1} : i64[4] loc(...)
            total_argmax = np.float32(-np.inf)
            for t in range(ninner):
                x = in0_x[i0, t]
                total_argmax = (x if (x > total_argmax) | (x != x) else total_argmax)
            first = ninner - ninner % 64
            for block in range(ninner // 64):
                hit = False
                for j in range(64):
                    x = in0_x[i0, block * 64 + j]
                    hit = hit | (x == total_argmax) | ((x != x) & (total_argmax != total_argmax))
                if hit:
                    first = block * 64
                    break
            best_index = 0
            for t in range(first, ninner):
                x = in0_x[i0, t]
                if (x == total_argmax) | ((x != x) & (total_argmax != total_argmax)):
                    best_index = t
                    break
            v_argmax = np.int64(best_index)
            out0[i0] = v_argmax
