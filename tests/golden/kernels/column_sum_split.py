# k0_mul_sum_max_add: reduce kernel, domain [600,40]
def kernel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n0
    for block in range((n1 + 1024 - 1) // 1024):
        low = block * 1024
        high = min(n1, low + 1024)
        # %sum = sum %mul {axes=[0]} : f32[40] loc(...)
        acc_sum = fj.stack_array(np.float32, 1024)
        wide_sum = fj.stack_array(np.float64, 1024)
        for j in range(high - low):
            acc_sum[j] = np.float32(0.0)
            wide_sum[j] = np.float64(0.0)
        # %max = max %x {axes=[0]} : f32[40] loc(...)
        acc_max = fj.stack_array(np.float32, 1024)
        for j in range(high - low):
            acc_max[j] = np.float32(-np.inf)
        position = 0
        for i0 in range(n0):
            row0_in0_x = in0_x[i0, low:high]
            for c in range(high - low):
                i1 = low + c
                # %mul = mul %x, %x : f32[600,40] loc(...)
                v_mul = np.float32((row0_in0_x[c] * row0_in0_x[c]))
                x = v_mul
                acc_sum[c] = (acc_sum[c] + x)
                x = row0_in0_x[c]
                acc_max[c] = (x if (x > acc_max[c]) | (x != x) else acc_max[c])
            position += 1
            if position % 16 == 0:
                for c in range(high - low):
                    wide_sum[c] = (wide_sum[c] + np.float64(acc_sum[c]))
                    acc_sum[c] = np.float32(0.0)
        for c in range(high - low):
            i1 = low + c
            v_sum = np.float32((wide_sum[c] + np.float64(acc_sum[c])))
            v_max = acc_max[c]
            # %add = add %sum, %max : f32[40] loc(...)
            v_add = np.float32((v_sum + v_max))
            out0[i1] = v_add


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
        # %sum = sum %mul {axes=[0]} : f32[40] loc(...)
        acc_sum = fj.stack_array(np.float32, 1024)
        wide_sum = fj.stack_array(np.float64, 1024)
        for j in range(high - low):
            acc_sum[j] = np.float32(0.0)
            wide_sum[j] = np.float64(0.0)
        # %max = max %x {axes=[0]} : f32[40] loc(...)
        acc_max = fj.stack_array(np.float32, 1024)
        for j in range(high - low):
            acc_max[j] = np.float32(-np.inf)
        position = 0
        for i0 in range(n0):
            row0_in0_x = in0_x[i0, low:high]
            for c in range(high - low):
                i1 = low + c
                # %mul = mul %x, %x : f32[600,40] loc(...)
                v_mul = np.float32((row0_in0_x[c] * row0_in0_x[c]))
                x = v_mul
                acc_sum[c] = (acc_sum[c] + x)
                x = row0_in0_x[c]
                acc_max[c] = (x if (x > acc_max[c]) | (x != x) else acc_max[c])
            position += 1
            if position % 16 == 0:
                for c in range(high - low):
                    wide_sum[c] = (wide_sum[c] + np.float64(acc_sum[c]))
                    acc_sum[c] = np.float32(0.0)
        for c in range(high - low):
            i1 = low + c
            v_sum = np.float32((wide_sum[c] + np.float64(acc_sum[c])))
            v_max = acc_max[c]
            # %add = add %sum, %max : f32[40] loc(...)
            v_add = np.float32((v_sum + v_max))
            out0[i1] = v_add
