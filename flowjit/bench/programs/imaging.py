"""Image and signal processing: colour, filters by slicing, pooling, pixel integers, windows."""

import numpy as np

from flowjit.bench.programs.registry import program, rows, side, uniform32


def image32(elements, rng):
    n = side(elements, multiple=2)
    return (uniform32(rng, 0, 1, n, n),)


def rgb_float(elements, rng):
    n = side(elements, per_pair=3, multiple=2)
    return (uniform32(rng, 0, 1, n, n, 3),)


def rgb_uint8(elements, rng):
    n = side(elements, per_pair=3, multiple=2)
    return (rng.integers(0, 256, (n, n, 3), dtype=np.uint8),)


@program(image32, "gamma correction img ** 2.2, float32")
def gamma_correct(img):
    return img ** 2.2


@program(rgb_float, "linear RGB to sRGB: np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055)")
def linear_to_srgb(c):
    return np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055)


@program(rgb_uint8, "uint8 HWC image to normalised float32 CHW with ImageNet mean and std")
def normalize_image(img):
    mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
    std = np.array([0.229, 0.224, 0.225], dtype=np.float32)
    x = img.astype(np.float32) / 255.0
    x = (x - mean) / std
    return x.transpose(2, 0, 1)


@program(rgb_float, "RGB to grayscale: np.dot(img[..., :3], [0.2989, 0.5870, 0.1140])")
def rgb_to_gray(img):
    return np.dot(img[..., :3], [0.2989, 0.5870, 0.1140])


@program(image32, "3x3 box blur of the interior: the sum of nine shifted slices / 9")
def box_blur(img):
    h, w = img.shape
    total = np.zeros((h - 2, w - 2), dtype=img.dtype)
    for dy in range(3):
        for dx in range(3):
            total = total + img[dy:h - 2 + dy, dx:w - 2 + dx]
    return total / 9


@program(image32, "Sobel gradient magnitude by slicing, np.hypot(gx, gy)")
def sobel_magnitude(img):
    gx = (img[:-2, 2:] + 2 * img[1:-1, 2:] + img[2:, 2:]) - (img[:-2, :-2] + 2 * img[1:-1, :-2] + img[2:, :-2])
    gy = (img[2:, :-2] + 2 * img[2:, 1:-1] + img[2:, 2:]) - (img[:-2, :-2] + 2 * img[:-2, 1:-1] + img[:-2, 2:])
    return np.hypot(gx, gy)


@program(lambda elements, rng: (rng.integers(0, 1 << 24, elements, dtype=np.int32),),
         "packed 0xRRGGBB int32 pixels to integer luma with // and %")
def packed_rgb_luma(pixels):
    r = (pixels // 65536) % 256
    g = (pixels // 256) % 256
    b = pixels % 256
    return (299 * r + 587 * g + 114 * b) // 1000


def blend_inputs(elements, rng):
    n = side(elements, per_pair=3, multiple=2)
    a = rng.integers(0, 256, (n, n, 3), dtype=np.uint8)
    b = rng.integers(0, 256, (n, n, 3), dtype=np.uint8)
    alpha = rng.integers(0, 256, (n, n, 1), dtype=np.uint8)
    return a, b, alpha


@program(blend_inputs, "alpha blending of uint8 images in int32 with rounding // 255")
def alpha_blend(a, b, alpha):
    alpha = alpha.astype(np.int32)
    out = (a.astype(np.int32) * alpha + b.astype(np.int32) * (255 - alpha) + 127) // 255
    return out.astype(np.uint8)


@program(image32, "2x2 average pooling with reshape and mean over axes (1, 3)")
def avg_pool(img):
    h, w = img.shape
    return img.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))


@program(rgb_float, "2x2 max pooling of an HWC image with reshape and max over axes (1, 3)")
def max_pool(img):
    h, w, c = img.shape
    return img.reshape(h // 2, 2, w // 2, 2, c).max(axis=(1, 3))


def frames(elements, rng):
    return (rng.standard_normal(rows(elements, 1024)).astype(np.float32),)


@program(frames, "Hann-windowed frames of 1024 and their energy in dB: np.hanning, 10 * np.log10")
def frame_energy_db(frames):
    window = np.hanning(frames.shape[1])
    windowed = frames * window
    return 10 * np.log10(np.sum(windowed**2, axis=1) + 1e-12)


@program(frames, "power spectrum of Hann-windowed frames with np.fft.rfft")
def power_spectrum(frames):
    window = np.hanning(frames.shape[1])
    spectrum = np.fft.rfft(frames * window, axis=1)
    return np.abs(spectrum) ** 2


def signal_and_taps(elements, rng):
    taps = np.hamming(16) / np.hamming(16).sum()
    return rng.standard_normal(elements).astype(np.float32), taps.astype(np.float32)


@program(signal_and_taps, "16-tap FIR filter as a sum of shifted slices (valid part)")
def fir_filter(x, h):
    n, k = len(x), len(h)
    y = np.zeros(n - k + 1, dtype=x.dtype)
    for i in range(k):
        y = y + h[i] * x[i:n - k + 1 + i]
    return y


@program(lambda elements, rng: (rng.standard_normal(elements),), "moving average with np.convolve(mode='valid')")
def moving_average_convolve(x, window=16):
    return np.convolve(x, np.ones(window) / window, mode="valid")


@program(lambda elements, rng: (rng.standard_normal(elements).astype(np.float32),),
         "symmetric int8 quantisation: np.round(x / scale), clip, astype, and back")
def quantize_int8(x):
    scale = np.abs(x).max() / 127
    q = np.clip(np.round(x / scale), -128, 127).astype(np.int8)
    return q, q.astype(np.float32) * scale
