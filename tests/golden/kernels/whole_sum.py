# k0_sum: reduce kernel, domain [100]
def kernel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    ninner = n0
    nparts = max(1, min(64, ninner // 65536))
    partials_sum = fj.heap_array(np.float64, nparts)
    for part in range(nparts):
        low = part * ninner // nparts
        high = (part + 1) * ninner // nparts
        row0_in0_x = in0_x[low:high]
        # %sum = sum %x {axes=[0]} : f32[] loc(...)
        total_sum = np.float64(0.0)
        lanes_sum = fj.stack_array(np.float32, 64)
        wide_sum = fj.stack_array(np.float64, 64)
        for j in range(64):
            lanes_sum[j] = np.float32(0.0)
            wide_sum[j] = np.float64(0.0)
        for block in range((high - low) // 64):
            for j in range(64):
                t = block * 64 + j
                x = row0_in0_x[t]
                lanes_sum[j] = (lanes_sum[j] + x)
            if block % 16 == 15:
                for j in range(64):
                    wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                    lanes_sum[j] = np.float32(0.0)
        tail = (high - low) - (high - low) % 64
        if tail < (high - low):
            last = max((high - low) - 64, 0)
            for j in range(64):
                t = last + j
                x = row0_in0_x[t] if last + j >= tail else np.float32(0.0)
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
        partials_sum[part] = total_sum
    total_sum = np.float64(0.0)
    for part in range(nparts):
        total_sum = (total_sum + partials_sum[part])
    v_sum = np.float32(total_sum)
    out0[0] = v_sum


def kernel_parallel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    ninner = n0
    nparts = max(1, min(64, ninner // 65536))
    partials_sum = fj.heap_array(np.float64, nparts)
    for part in prange(nparts):
        fj.vector_width(512)
        low = part * ninner // nparts
        high = (part + 1) * ninner // nparts
        row0_in0_x = in0_x[low:high]
        # %sum = sum %x {axes=[0]} : f32[] loc(...)
        total_sum = np.float64(0.0)
        lanes_sum = fj.stack_array(np.float32, 64)
        wide_sum = fj.stack_array(np.float64, 64)
        for j in range(64):
            lanes_sum[j] = np.float32(0.0)
            wide_sum[j] = np.float64(0.0)
        for block in range((high - low) // 64):
            for j in range(64):
                t = block * 64 + j
                x = row0_in0_x[t]
                lanes_sum[j] = (lanes_sum[j] + x)
            if block % 16 == 15:
                for j in range(64):
                    wide_sum[j] = (wide_sum[j] + np.float64(lanes_sum[j]))
                    lanes_sum[j] = np.float32(0.0)
        tail = (high - low) - (high - low) % 64
        if tail < (high - low):
            last = max((high - low) - 64, 0)
            for j in range(64):
                t = last + j
                x = row0_in0_x[t] if last + j >= tail else np.float32(0.0)
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
        partials_sum[part] = total_sum
    total_sum = np.float64(0.0)
    for part in range(nparts):
        total_sum = (total_sum + partials_sum[part])
    v_sum = np.float32(total_sum)
    out0[0] = v_sum
