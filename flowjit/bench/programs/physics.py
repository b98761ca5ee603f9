"""Physics: pairwise forces by broadcasting, stencils by slicing, integrator steps."""

import numpy as np

from flowjit.bench.programs.registry import program, side


def particles(elements, rng):
    n = side(elements, per_pair=3, multiple=8)
    return rng.uniform(-1, 1, (n, 3)), rng.uniform(0.5, 1.5, n)


@program(particles, "n-body accelerations: pairwise displacements by broadcasting, r2 ** -1.5, float64")
def nbody_accelerations(pos, mass, G=1.0, softening=0.01):
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d**2).sum(axis=-1) + softening**2
    inv_r3 = r2 ** -1.5
    return G * (d * (inv_r3 * mass)[:, :, None]).sum(axis=1)


@program(lambda elements, rng: (particles(elements, rng)[0] * 5,),
         "Lennard-Jones energy over pairs i < j with np.triu(energies, k=1)")
def lennard_jones_energy(pos, epsilon=1.0, sigma=1.0):
    d = pos[:, None, :] - pos[None, :, :]
    r2 = np.sum(d * d, axis=-1) + np.eye(len(pos))
    sr6 = (sigma**2 / r2) ** 3
    energies = 4 * epsilon * (sr6**2 - sr6)
    return np.triu(energies, k=1).sum()


def grid(elements, rng):
    n = side(elements)
    return (rng.random((n, n)),)


@program(grid, "explicit heat equation, 10 steps, u.copy() and slice assignment of the interior")
def heat_equation(u, alpha=0.2, steps=10):
    for _ in range(steps):
        new = u.copy()
        new[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * (
            u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
        u = new
    return u


@program(grid, "five-point Laplacian of the interior by slicing, and its mean square")
def laplacian(u, dx=0.01):
    lap = (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]) / dx**2
    return lap, np.mean(lap**2)


def oscillators(elements, rng):
    return rng.standard_normal(elements), rng.standard_normal(elements)


@program(oscillators, "velocity Verlet step of harmonic oscillators, dt**2 (returns x, v, energy)")
def verlet_step(x, v, k=1.0, m=1.0, dt=0.01):
    a = -k / m * x
    x_new = x + v * dt + 0.5 * a * dt**2
    a_new = -k / m * x_new
    v_new = v + 0.5 * (a + a_new) * dt
    energy = 0.5 * m * np.sum(v_new**2) + 0.5 * k * np.sum(x_new**2)
    return x_new, v_new, energy


@program(oscillators, "1-D wave equation step on a periodic grid with np.roll")
def wave_step(u, u_prev, c=1.0, dt=0.1, dx=1.0):
    lap = np.roll(u, 1) - 2 * u + np.roll(u, -1)
    return 2 * u - u_prev + (c * dt / dx) ** 2 * lap


def velocities(elements, rng):
    n = max(1, elements // 3)
    return rng.standard_normal((n, 3)), rng.uniform(1, 2, n)


@program(velocities, "kinetic energy and temperature of particles: m[:, None] * v**2")
def kinetic_temperature(v, m, k_B=1.380649e-23):
    kinetic = 0.5 * np.sum(m[:, None] * v**2)
    temperature = 2 * kinetic / (3 * len(m) * k_B)
    return kinetic, temperature


@program(lambda elements, rng: (rng.uniform(0, 2000, elements),),
         "Maxwell-Boltzmann speed distribution of nitrogen at 300 K ((m/(2 pi k T)) ** 1.5)")
def maxwell_boltzmann(v, T=300.0, m=4.65e-26, k=1.380649e-23):
    return 4 * np.pi * (m / (2 * np.pi * k * T)) ** 1.5 * v**2 * np.exp(-m * v**2 / (2 * k * T))


def plane(elements, rng):
    n = side(elements)
    real = np.linspace(-2.0, 0.6, n)
    imag = np.linspace(-1.2, 1.2, n)
    cr, ci = np.meshgrid(real, imag)
    return cr, ci


@program(plane, "Mandelbrot escape counts, 20 iterations with real and imaginary parts and np.where")
def mandelbrot(cr, ci, max_iter=20):
    zr = np.zeros_like(cr)
    zi = np.zeros_like(ci)
    count = np.zeros(cr.shape, dtype=np.int32)
    for _ in range(max_iter):
        inside = zr * zr + zi * zi <= 4.0
        zr, zi = np.where(inside, zr * zr - zi * zi + cr, zr), np.where(inside, 2 * zr * zi + ci, zi)
        count += inside
    return count


def box(elements, rng):
    n = max(1, elements // 3)
    return rng.uniform(-0.1, 1.1, (n, 3)), rng.standard_normal((n, 3))


@program(box, "particles reflected at the walls of a unit box with np.where")
def reflect_walls(x, v, L=1.0):
    v = np.where((x < 0) | (x > L), -v, v)
    x = np.where(x < 0, -x, x)
    x = np.where(x > L, 2 * L - x, x)
    return x, v
