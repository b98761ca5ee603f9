# k0_max_sub_exp_sum_div: reduce kernel, domain [2,128]
def kernel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in range((n0 + 63) // 64):
        s_exp = fj.heap_array(np.float32, ninner)
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %max = max %x {axes=[1], keepdims=true} : f32[2,1] loc(...)
            total_max = np.float32(-np.inf)
            lanes_max = fj.stack_array(np.float32, 64)
            for j in range(64):
                lanes_max[j] = np.float32(-np.inf)
            for block in range(ninner // 64):
                for j in range(64):
                    t = block * 64 + j
                    x = in0_x[i0, t]
                    lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
            tail = ninner - ninner % 64
            if tail < ninner:
                last = max(ninner - 64, 0)
                for j in range(64):
                    t = last + j
                    x = in0_x[i0, t] if last + j >= tail else np.float32(-np.inf)
                    lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
            for j in range(16):
                for group in range(1, 4):
                    x = lanes_max[j + group * 16]
                    lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
            for j in range(16):
                total_max = (lanes_max[j] if (lanes_max[j] > total_max) | (lanes_max[j] != lanes_max[j]) else total_max)
            v_max = total_max
            # %sum = sum %exp {axes=[1], keepdims=true} : f32[2,1] loc(...)
            total_sum = np.float64(0.0)
            lanes_sum = fj.stack_array(np.float32, 64)
            wide_sum = fj.stack_array(np.float64, 64)
            for j in range(64):
                lanes_sum[j] = np.float32(0.0)
                wide_sum[j] = np.float64(0.0)
            for block in range(ninner // 64):
                for j in range(64):
                    t = block * 64 + j
                    i1 = t
                    # %sub = sub %x, %max : f32[2,128] loc(...)
                    v_sub = np.float32((in0_x[i0, i1] - v_max))
                    # %exp = exp %sub : f32[2,128] loc(...)
                    v_exp = np.float32(fj.exp_f32(v_sub))
                    s_exp[t] = v_exp
                    x = v_exp
                    lanes_sum[j] = (lanes_sum[j] + x)
                if block % 16 == 15:
                    for j in range(64):
                        wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                        lanes_sum[j] = np.float32(0.0)
            tail = ninner - ninner % 64
            if tail < ninner:
                last = max(ninner - 64, 0)
                for j in range(64):
                    t = last + j
                    i1 = t
                    # %sub = sub %x, %max : f32[2,128] loc(...)
                    v_sub = np.float32((in0_x[i0, i1] - v_max))
                    # %exp = exp %sub : f32[2,128] loc(...)
                    v_exp = np.float32(fj.exp_f32(v_sub))
                    s_exp[t] = v_exp
                    x = v_exp if last + j >= tail else np.float32(0.0)
                    lanes_sum[j] = (lanes_sum[j] + x)
            for j in range(64):
                wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                lanes_sum[j] = np.float32(0.0)
            for j in range(16):
                for group in range(1, 4):
                    x = wide_sum[j + group * 16]
                    wide_sum[j] = (wide_sum[j] + x)
            for j in range(16):
                total_sum = (total_sum + wide_sum[j])
            v_sum = np.float32(total_sum)
            for t in range(ninner):
                i1 = t
                v_exp = s_exp[t]
                # %div = div %exp, %sum : f32[2,128] loc(...)
                v_div = np.float32((v_exp / v_sum))
                out0[i0, i1] = v_div


def kernel_parallel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in prange((n0 + 63) // 64):
        fj.vector_width(512)
        s_exp = fj.heap_array(np.float32, ninner)
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %max = max %x {axes=[1], keepdims=true} : f32[2,1] loc(...)
            total_max = np.float32(-np.inf)
            lanes_max = fj.stack_array(np.float32, 64)
            for j in range(64):
                lanes_max[j] = np.float32(-np.inf)
            for block in range(ninner // 64):
                for j in range(64):
                    t = block * 64 + j
                    x = in0_x[i0, t]
                    lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
            tail = ninner - ninner % 64
            if tail < ninner:
                last = max(ninner - 64, 0)
                for j in range(64):
                    t = last + j
                    x = in0_x[i0, t] if last + j >= tail else np.float32(-np.inf)
                    lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
            for j in range(16):
                for group in range(1, 4):
                    x = lanes_max[j + group * 16]
                    lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
            for j in range(16):
                total_max = (lanes_max[j] if (lanes_max[j] > total_max) | (lanes_max[j] != lanes_max[j]) else total_max)
            v_max = total_max
            # %sum = sum %exp {axes=[1], keepdims=true} : f32[2,1] loc(...)
            total_sum = np.float64(0.0)
            lanes_sum = fj.stack_array(np.float32, 64)
            wide_sum = fj.stack_array(np.float64, 64)
            for j in range(64):
                lanes_sum[j] = np.float32(0.0)
                wide_sum[j] = np.float64(0.0)
            for block in range(ninner // 64):
                for j in range(64):
                    t = block * 64 + j
                    i1 = t
                    # %sub = sub %x, %max : f32[2,128] loc(...)
                    v_sub = np.float32((in0_x[i0, i1] - v_max))
                    # %exp = exp %sub : f32[2,128] loc(...)
                    v_exp = np.float32(fj.exp_f32(v_sub))
                    s_exp[t] = v_exp
                    x = v_exp
                    lanes_sum[j] = (lanes_sum[j] + x)
                if block % 16 == 15:
                    for j in range(64):
                        wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                        lanes_sum[j] = np.float32(0.0)
            tail = ninner - ninner % 64
            if tail < ninner:
                last = max(ninner - 64, 0)
                for j in range(64):
                    t = last + j
                    i1 = t
                    # %sub = sub %x, %max : f32[2,128] loc(...)
                    v_sub = np.float32((in0_x[i0, i1] - v_max))
                    # %exp = exp %sub : f32[2,128] loc(...)
                    v_exp = np.float32(fj.exp_f32(v_sub))
                    s_exp[t] = v_exp
                    x = v_exp if last + j >= tail else np.float32(0.0)
                    lanes_sum[j] = (lanes_sum[j] + x)
            for j in range(64):
                wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                lanes_sum[j] = np.float32(0.0)
            for j in range(16):
                for group in range(1, 4):
                    x = wide_sum[j + group * 16]
                    wide_sum[j] = (wide_sum[j] + x)
            for j in range(16):
                total_sum = (total_sum + wide_sum[j])
            v_sum = np.float32(total_sum)
            for t in range(ninner):
                i1 = t
                v_exp = s_exp[t]
                # %div = div %exp, %sum : f32[2,128] loc(...)
                v_div = np.float32((v_exp / v_sum))
                out0[i0, i1] = v_div
