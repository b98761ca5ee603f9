# k0_mul_add_mul_abs_div_sub: loop kernel, domain [8]
def kernel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    for i0 in range(n0):
        # %mul = mul %x, %constant : f64[8] loc(...)
        v_mul = np.float64((in0_x[i0] * np.float64(2.0)))
        # %add = add %mul, %constant_1 : f64[8] loc(...)
        v_add = np.float64((v_mul + np.float64(1.0)))
        # %mul_1 = mul %add, %x : f64[8] loc(...)
        v_mul_1 = np.float64((v_add * in0_x[i0]))
        # %abs = abs %x : f64[8] loc(...)
        v_abs = np.float64(abs(in0_x[i0]))
        # %div = div %abs, %constant_2 : f64[8] loc(...)
        v_div = np.float64((v_abs / np.float64(3.0)))
        # %sub = sub %mul_1, %div : f64[8] loc(...)
        v_sub = np.float64((v_mul_1 - v_div))
        out0[i0] = v_sub


def kernel_parallel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_x[low:high], out0[low:high])
