# k0_mean_sub_square_mean_add_sqrt: reduce kernel, domain [2,128]
def kernel(in0_x, in1_gamma, in2_beta, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in range((n0 + 63) // 64):
        s_sub = fj.heap_array(np.float32, ninner)
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %mean = mean %x {axes=[1], keepdims=true} : f32[2,1] loc(...)
            total_mean = np.float64(0.0)
            lanes_mean = fj.stack_array(np.float32, 64)
            wide_mean = fj.stack_array(np.float64, 64)
            for j in range(64):
                lanes_mean[j] = np.float32(0.0)
                wide_mean[j] = np.float64(0.0)
            for block in range(ninner // 64):
                for j in range(64):
                    t = block * 64 + j
                    x = in0_x[i0, t]
                    lanes_mean[j] = (lanes_mean[j] + x)
                if block % 16 == 15:
                    for j in range(64):
                        wide_mean[j] = (wide_mean[j] + np.float64(lanes_mean[j]))
                        lanes_mean[j] = np.float32(0.0)
            tail = ninner - ninner % 64
            if tail < ninner:
                last = max(ninner - 64, 0)
                for j in range(64):
                    t = last + j
                    x = in0_x[i0, t] if last + j >= tail else np.float32(0.0)
                    lanes_mean[j] = (lanes_mean[j] + x)
            for j in range(64):
                wide_mean[j] = (wide_mean[j] + np.float64(lanes_mean[j]))
                lanes_mean[j] = np.float32(0.0)
            for j in range(16):
                for group in range(1, 4):
                    x = wide_mean[j + group * 16]
                    wide_mean[j] = (wide_mean[j] + x)
            for j in range(16):
                total_mean = (total_mean + wide_mean[j])
            v_mean = np.float32((total_mean / np.float64(ninner)))
            # %mean_1 = mean %square {axes=[1], keepdims=true} : f32[2,1] loc(...)
            total_mean_1 = np.float64(0.0)
            lanes_mean_1 = fj.stack_array(np.float32, 64)
            wide_mean_1 = fj.stack_array(np.float64, 64)
            for j in range(64):
                lanes_mean_1[j] = np.float32(0.0)
                wide_mean_1[j] = np.float64(0.0)
            for block in range(ninner // 64):
                for j in range(64):
                    t = block * 64 + j
                    i1 = t
                    # %sub = sub %x, %mean : f32[2,128] loc(...)
                    v_sub = np.float32((in0_x[i0, i1] - v_mean))
                    # %square = square %sub : f32[2,128] loc(...)
                    v_square = np.float32((v_sub * v_sub))
                    s_sub[t] = v_sub
                    x = v_square
                    lanes_mean_1[j] = (lanes_mean_1[j] + x)
                if block % 16 == 15:
                    for j in range(64):
                        wide_mean_1[j] = (wide_mean_1[j] + np.float64(lanes_mean_1[j]))
                        lanes_mean_1[j] = np.float32(0.0)
            tail = ninner - ninner % 64
            if tail < ninner:
                last = max(ninner - 64, 0)
                for j in range(64):
                    t = last + j
                    i1 = t
                    # %sub = sub %x, %mean : f32[2,128] loc(...)
                    v_sub = np.float32((in0_x[i0, i1] - v_mean))
                    # %square = square %sub : f32[2,128] loc(...)
                    v_square = np.float32((v_sub * v_sub))
                    s_sub[t] = v_sub
                    x = v_square if last + j >= tail else np.float32(0.0)
                    lanes_mean_1[j] = (lanes_mean_1[j] + x)
            for j in range(64):
                wide_mean_1[j] = (wide_mean_1[j] + np.float64(lanes_mean_1[j]))
                lanes_mean_1[j] = np.float32(0.0)
            for j in range(16):
                for group in range(1, 4):
                    x = wide_mean_1[j + group * 16]
                    wide_mean_1[j] = (wide_mean_1[j] + x)
            for j in range(16):
                total_mean_1 = (total_mean_1 + wide_mean_1[j])
            v_mean_1 = np.float32((total_mean_1 / np.float64(ninner)))
            # %add = add %mean_1, %constant : f32[2,1] loc(...)
            v_add = np.float32((v_mean_1 + np.float32(9.999999747378752e-06)))
            # %sqrt = sqrt %add : f32[2,1] loc(...)
            v_sqrt = np.float32(math.sqrt(v_add))
            for t in range(ninner):
                i1 = t
                v_sub = s_sub[t]
                # %div = div %sub, %sqrt : f32[2,128] loc(...)
                v_div = np.float32((v_sub / v_sqrt))
                # %mul = mul %div, %gamma : f32[2,128] loc(...)
                v_mul = np.float32((v_div * in1_gamma[i1]))
                # %add_1 = add %mul, %beta : f32[2,128] loc(...)
                v_add_1 = np.float32((v_mul + in2_beta[i1]))
                out0[i0, i1] = v_add_1


def kernel_parallel(in0_x, in1_gamma, in2_beta, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in prange((n0 + 63) // 64):
        fj.vector_width(512)
        s_sub = fj.heap_array(np.float32, ninner)
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %mean = mean %x {axes=[1], keepdims=true} : f32[2,1] loc(...)
            total_mean = np.float64(0.0)
            lanes_mean = fj.stack_array(np.float32, 64)
            wide_mean = fj.stack_array(np.float64, 64)
            for j in range(64):
                lanes_mean[j] = np.float32(0.0)
                wide_mean[j] = np.float64(0.0)
            for block in range(ninner // 64):
                for j in range(64):
                    t = block * 64 + j
                    x = in0_x[i0, t]
                    lanes_mean[j] = (lanes_mean[j] + x)
                if block % 16 == 15:
                    for j in range(64):
                        wide_mean[j] = (wide_mean[j] + np.float64(lanes_mean[j]))
                        lanes_mean[j] = np.float32(0.0)
            tail = ninner - ninner % 64
            if tail < ninner:
                last = max(ninner - 64, 0)
                for j in range(64):
                    t = last + j
                    x = in0_x[i0, t] if last + j >= tail else np.float32(0.0)
                    lanes_mean[j] = (lanes_mean[j] + x)
            for j in range(64):
                wide_mean[j] = (wide_mean[j] + np.float64(lanes_mean[j]))
                lanes_mean[j] = np.float32(0.0)
            for j in range(16):
                for group in range(1, 4):
                    x = wide_mean[j + group * 16]
                    wide_mean[j] = (wide_mean[j] + x)
            for j in range(16):
                total_mean = (total_mean + wide_mean[j])
            v_mean = np.float32((total_mean / np.float64(ninner)))
            # %mean_1 = mean %square {axes=[1], keepdims=true} : f32[2,1] loc(...)
            total_mean_1 = np.float64(0.0)
            lanes_mean_1 = fj.stack_array(np.float32, 64)
            wide_mean_1 = fj.stack_array(np.float64, 64)
            for j in range(64):
                lanes_mean_1[j] = np.float32(0.0)
                wide_mean_1[j] = np.float64(0.0)
            for block in range(ninner // 64):
                for j in range(64):
                    t = block * 64 + j
                    i1 = t
                    # %sub = sub %x, %mean : f32[2,128] loc(...)
                    v_sub = np.float32((in0_x[i0, i1] - v_mean))
                    # %square = square %sub : f32[2,128] loc(...)
                    v_square = np.float32((v_sub * v_sub))
                    s_sub[t] = v_sub
                    x = v_square
                    lanes_mean_1[j] = (lanes_mean_1[j] + x)
                if block % 16 == 15:
                    for j in range(64):
                        wide_mean_1[j] = (wide_mean_1[j] + np.float64(lanes_mean_1[j]))
                        lanes_mean_1[j] = np.float32(0.0)
            tail = ninner - ninner % 64
            if tail < ninner:
                last = max(ninner - 64, 0)
                for j in range(64):
                    t = last + j
                    i1 = t
                    # %sub = sub %x, %mean : f32[2,128] loc(...)
                    v_sub = np.float32((in0_x[i0, i1] - v_mean))
                    # %square = square %sub : f32[2,128] loc(...)
                    v_square = np.float32((v_sub * v_sub))
                    s_sub[t] = v_sub
                    x = v_square if last + j >= tail else np.float32(0.0)
                    lanes_mean_1[j] = (lanes_mean_1[j] + x)
            for j in range(64):
                wide_mean_1[j] = (wide_mean_1[j] + np.float64(lanes_mean_1[j]))
                lanes_mean_1[j] = np.float32(0.0)
            for j in range(16):
                for group in range(1, 4):
                    x = wide_mean_1[j + group * 16]
                    wide_mean_1[j] = (wide_mean_1[j] + x)
            for j in range(16):
                total_mean_1 = (total_mean_1 + wide_mean_1[j])
            v_mean_1 = np.float32((total_mean_1 / np.float64(ninner)))
            # %add = add %mean_1, %constant : f32[2,1] loc(...)
            v_add = np.float32((v_mean_1 + np.float32(9.999999747378752e-06)))
            # %sqrt = sqrt %add : f32[2,1] loc(...)
            v_sqrt = np.float32(math.sqrt(v_add))
            for t in range(ninner):
                i1 = t
                v_sub = s_sub[t]
                # %div = div %sub, %sqrt : f32[2,128] loc(...)
                v_div = np.float32((v_sub / v_sqrt))
                # %mul = mul %div, %gamma : f32[2,128] loc(...)
                v_mul = np.float32((v_div * in1_gamma[i1]))
                # %add_1 = add %mul, %beta : f32[2,128] loc(...)
                v_add_1 = np.float32((v_mul + in2_beta[i1]))
                out0[i0, i1] = v_add_1
