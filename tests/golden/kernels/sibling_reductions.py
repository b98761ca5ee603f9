# k0_sum_max: reduce kernel, domain [4,8]
def kernel(in0_x, out0, out1):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in range((n0 + 63) // 64):
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %sum = sum %x {axes=[1]} : f32[4] loc(...)
            total_sum = np.float64(0.0)
            # %max = max %x {axes=[1]} : f32[4] loc(...)
            total_max = np.float32(-np.inf)
            for t in range(ninner):
                x = np.float64(in0_x[i0, t])
                total_sum = (total_sum + x)
                x = in0_x[i0, t]
                total_max = (x if (x > total_max) | (x != x) else total_max)
            v_sum = np.float32(total_sum)
            v_max = total_max
            out0[i0] = v_sum
            out1[i0] = v_max


def kernel_parallel(in0_x, out0, out1):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in prange((n0 + 63) // 64):
        fj.vector_width(512)
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %sum = sum %x {axes=[1]} : f32[4] loc(...)
            total_sum = np.float64(0.0)
            # %max = max %x {axes=[1]} : f32[4] loc(...)
            total_max = np.float32(-np.inf)
            for t in range(ninner):
                x = np.float64(in0_x[i0, t])
                total_sum = (total_sum + x)
                x = in0_x[i0, t]
                total_max = (x if (x > total_max) | (x != x) else total_max)
            v_sum = np.float32(total_sum)
            v_max = total_max
            out0[i0] = v_sum
            out1[i0] = v_max
