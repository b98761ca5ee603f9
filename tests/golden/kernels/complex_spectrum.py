# k0_mul_exp_add_div: loop kernel, domain [4,8]
def kernel(in0_x, in1_constant, out0, out1):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    for i0 in range(n0):
        for i1 in range(n1):
            # %mul = mul %x, %constant : f64[4,8] loc(...)
            v_mul = np.float64((in0_x[i0, i1] * in1_constant[i1]))
            # %mul_1 = mul %constant_1, %x : c128[4,8] loc(...)
            v_mul_1 = np.complex128((np.complex128(complex(np.float64(0.0), np.float64(1.0))) * np.complex128(in0_x[i0, i1])))
            # %exp = exp %mul_1 : c128[4,8] loc(...)
            v_exp = np.complex128(fj.complex_exp_c128(v_mul_1))
            # %add = add %x, %constant_2 : c128[4,8] loc(...)
            v_add = np.complex128((np.complex128(in0_x[i0, i1]) + np.complex128(complex(np.float64(0.0), np.float64(2.0)))))
            # %div = div %exp, %add : c128[4,8] loc(...)
            v_div = np.complex128(fj.complex_divide_c128(v_exp, v_add))
            out0[i0, i1] = v_mul
            out1[i0, i1] = v_div


def kernel_parallel(in0_x, in1_constant, out0, out1):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_x[low:high], in1_constant, out0[low:high], out1[low:high])


# k1_abs_square: loop kernel, domain [20]
def kernel(in0_rfft, out0):
    fj.vector_width(512)
    n0 = in0_rfft.shape[0]
    for i0 in range(n0):
        # %abs = abs %rfft : f64[20] loc(...)
        v_abs = np.float64(fj.complex_abs_c128(in0_rfft[i0]))
        # %square = square %abs : f64[20] loc(...)
        v_square = np.float64((v_abs * v_abs))
        out0[i0] = v_square


def kernel_parallel(in0_rfft, out0):
    fj.vector_width(512)
    n0 = in0_rfft.shape[0]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_rfft[low:high], out0[low:high])
