# k0_sum_max: reduce kernel, domain [4,8]
def kernel(in0_x, out0, out1):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in range((n0 + 63) // 64):
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %sum = sum %x {axes=[1]} : f32[4] loc(...)
            total_sum = np.float64(0.0)
            # %max = max %x {axes=[1]} : f32[4] loc(...)
            total_max = np.float32(-np.inf)
            tail = 0
            if ninner >= 128:
                lanes_sum = fj.stack_array(np.float32, 64)
                wide_sum = fj.stack_array(np.float64, 64)
                for j in range(64):
                    lanes_sum[j] = np.float32(0.0)
                    wide_sum[j] = np.float64(0.0)
                lanes_max = fj.stack_array(np.float32, 64)
                for j in range(64):
                    lanes_max[j] = np.float32(-np.inf)
                for block in range(ninner // 64):
                    for j in range(64):
                        t = block * 64 + j
                        x = in0_x[i0, t]
                        lanes_sum[j] = (lanes_sum[j] + x)
                        x = in0_x[i0, t]
                        lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
                    if block % 16 == 15:
                        for j in range(64):
                            wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                            lanes_sum[j] = np.float32(0.0)
                for j in range(64):
                    wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                    lanes_sum[j] = np.float32(0.0)
                for j in range(16):
                    for group in range(1, 4):
                        x = wide_sum[j + group * 16]
                        wide_sum[j] = (wide_sum[j] + x)
                for j in range(16):
                    total_sum = (total_sum + wide_sum[j])
                for j in range(16):
                    for group in range(1, 4):
                        x = lanes_max[j + group * 16]
                        lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
                for j in range(16):
                    total_max = (lanes_max[j] if (lanes_max[j] > total_max) | (lanes_max[j] != lanes_max[j]) else total_max)
                tail = ninner - ninner % 64
            for t in range(tail, ninner):
                x = np.float64(in0_x[i0, t])
                total_sum = (total_sum + x)
                x = in0_x[i0, t]
                total_max = (x if (x > total_max) | (x != x) else total_max)
            v_sum = np.float32(total_sum)
            v_max = total_max
            out0[i0] = v_sum
            out1[i0] = v_max


def kernel_parallel(in0_x, out0, out1):
    n0 = in0_x.shape[0]
    n1 = in0_x.shape[1]
    ninner = n1
    for chunk in prange((n0 + 63) // 64):
        for i0 in range(chunk * 64, min(n0, (chunk + 1) * 64)):
            # %sum = sum %x {axes=[1]} : f32[4] loc(...)
            total_sum = np.float64(0.0)
            # %max = max %x {axes=[1]} : f32[4] loc(...)
            total_max = np.float32(-np.inf)
            tail = 0
            if ninner >= 128:
                lanes_sum = fj.stack_array(np.float32, 64)
                wide_sum = fj.stack_array(np.float64, 64)
                for j in range(64):
                    lanes_sum[j] = np.float32(0.0)
                    wide_sum[j] = np.float64(0.0)
                lanes_max = fj.stack_array(np.float32, 64)
                for j in range(64):
                    lanes_max[j] = np.float32(-np.inf)
                for block in range(ninner // 64):
                    for j in range(64):
                        t = block * 64 + j
                        x = in0_x[i0, t]
                        lanes_sum[j] = (lanes_sum[j] + x)
                        x = in0_x[i0, t]
                        lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
                    if block % 16 == 15:
                        for j in range(64):
                            wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                            lanes_sum[j] = np.float32(0.0)
                for j in range(64):
                    wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                    lanes_sum[j] = np.float32(0.0)
                for j in range(16):
                    for group in range(1, 4):
                        x = wide_sum[j + group * 16]
                        wide_sum[j] = (wide_sum[j] + x)
                for j in range(16):
                    total_sum = (total_sum + wide_sum[j])
                for j in range(16):
                    for group in range(1, 4):
                        x = lanes_max[j + group * 16]
                        lanes_max[j] = (x if (x > lanes_max[j]) | (x != x) else lanes_max[j])
                for j in range(16):
                    total_max = (lanes_max[j] if (lanes_max[j] > total_max) | (lanes_max[j] != lanes_max[j]) else total_max)
                tail = ninner - ninner % 64
            for t in range(tail, ninner):
                x = np.float64(in0_x[i0, t])
                total_sum = (total_sum + x)
                x = in0_x[i0, t]
                total_max = (x if (x > total_max) | (x != x) else total_max)
            v_sum = np.float32(total_sum)
            v_max = total_max
            out0[i0] = v_sum
            out1[i0] = v_max
