# k0_sum: reduce kernel, domain [32]
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
        for t in range((high - low)):
            x = np.float64(row0_in0_x[t])
            total_sum = (total_sum + x)
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
        for t in range((high - low)):
            x = np.float64(row0_in0_x[t])
            total_sum = (total_sum + x)
        partials_sum[part] = total_sum
    total_sum = np.float64(0.0)
    for part in range(nparts):
        total_sum = (total_sum + partials_sum[part])
    v_sum = np.float32(total_sum)
    out0[0] = v_sum
