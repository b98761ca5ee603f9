# k0_mean: reduce kernel, domain [4,8]
def kernel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n0
    for block in range((n1 + 1024 - 1) // 1024):
        low = block * 1024
        high = min(n1, low + 1024)
        # %mean = mean %x {axes=[0]} : f32[8] loc(...)
        acc_mean = fj.stack_array(np.float32, 1024)
        wide_mean = fj.stack_array(np.float64, 1024)
        for j in range(high - low):
            acc_mean[j] = np.float32(0.0)
            wide_mean[j] = np.float64(0.0)
        position = 0
        for i0 in range(n0):
            row0_in0_x = in0_x[i0, low:high]
            for c in range(high - low):
                i1 = low + c
                x = row0_in0_x[c]
                acc_mean[c] = (acc_mean[c] + x)
            position += 1
            if position % 16 == 0:
                for c in range(high - low):
                    wide_mean[c] = (wide_mean[c] + np.float64(acc_mean[c]))
                    acc_mean[c] = np.float32(0.0)
        for c in range(high - low):
            i1 = low + c
            v_mean = np.float32(((wide_mean[c] + np.float64(acc_mean[c])) / np.float64(ninner)))
            out0[i1] = v_mean


def kernel_parallel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n0
    width = fj.column_block(n1, 1024)
    for block in prange((n1 + width - 1) // width):
        fj.vector_width(512)
        low = block * width
        high = min(n1, low + width)
        # %mean = mean %x {axes=[0]} : f32[8] loc(...)
        acc_mean = fj.stack_array(np.float32, 1024)
        wide_mean = fj.stack_array(np.float64, 1024)
        for j in range(high - low):
            acc_mean[j] = np.float32(0.0)
            wide_mean[j] = np.float64(0.0)
        position = 0
        for i0 in range(n0):
            row0_in0_x = in0_x[i0, low:high]
            for c in range(high - low):
                i1 = low + c
                x = row0_in0_x[c]
                acc_mean[c] = (acc_mean[c] + x)
            position += 1
            if position % 16 == 0:
                for c in range(high - low):
                    wide_mean[c] = (wide_mean[c] + np.float64(acc_mean[c]))
                    acc_mean[c] = np.float32(0.0)
        for c in range(high - low):
            i1 = low + c
            v_mean = np.float32(((wide_mean[c] + np.float64(acc_mean[c])) / np.float64(ninner)))
            out0[i1] = v_mean
