//! The decoder's arithmetic, without a tensor library: matrices held as float32 or as int8
//! with a scale per row, multiplied by a few vectors at a time, and the small vector
//! operations around them. A decoding step reads every weight of the decoder once for one
//! token, so it is bound by memory, not arithmetic: int8 rows read a quarter of the bytes,
//! and nothing here allocates per step.
//!
//! The dot products are written so that the compiler vectorizes them (independent lanes, no
//! reassociation needed) and are compiled twice: for AVX2 with FMA, chosen at run time, and
//! for the baseline.

use rayon::prelude::*;

/// How a matrix's weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Float32,
    /// Symmetric int8 per row: `w[r][c] ≈ scale[r] · q[r][c]`.
    Int8,
}

impl Precision {
    /// The name shown in settings and reports.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Float32 => "float32",
            Precision::Int8 => "int8",
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "int8" => Ok(Precision::Int8),
            "float32" => Ok(Precision::Float32),
            other => Err(format!("{other:?} is not a precision: use int8 or float32")),
        }
    }
}

/// A row's int8 scale (`max |x| / 127`, 0 for a row of zeros) and its inverse, which
/// quantizes: `x ≈ scale · round(x · inverse)`.
#[inline(always)]
pub(crate) fn row_scale(row: &[f32]) -> (f32, f32) {
    let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
    if max > 0.0 {
        (max / 127.0, 127.0 / max)
    } else {
        (0.0, 0.0)
    }
}

/// `x` (in [-127, 127] but for rounding) to the nearest integer, ties to even, as int8. Adding
/// and taking away 1.5·2^23 rounds without the library call that `round` is on baseline
/// x86-64.
#[inline(always)]
pub(crate) fn round_to_i8(x: f32) -> i8 {
    const ROUNDER: f32 = 12_582_912.0;
    ((x + ROUNDER) - ROUNDER).clamp(-127.0, 127.0) as i8
}

enum Weights {
    F32(Vec<f32>),
    I8 { q: Vec<i8>, scales: Vec<f32> },
}

/// A dense `rows × cols` matrix (row-major: one row per output) with an optional bias.
pub struct Matrix {
    rows: usize,
    cols: usize,
    weights: Weights,
    bias: Option<Vec<f32>>,
}

/// Rows × inputs below which one thread is quicker than two.
const PARALLEL_WORK: usize = 1 << 19;

const LANES: usize = 16;

/// `a · b + c`: fused where the CPU has FMA (the AVX2 builds), plain elsewhere, where a
/// fused multiply-add would be a slow library call.
#[inline(always)]
fn madd_plain(a: f32, b: f32, c: f32) -> f32 {
    a * b + c
}

macro_rules! dot_kernels {
    ($f32_name:ident, $i8_name:ident, $madd:path) => {
        #[inline(always)]
        fn $f32_name(w: &[f32], x: &[f32]) -> f32 {
            let mut acc = [0f32; LANES];
            let (wc, wr) = w.split_at(w.len() / LANES * LANES);
            let (xc, xr) = x.split_at(wc.len());
            for (w, x) in wc.chunks_exact(LANES).zip(xc.chunks_exact(LANES)) {
                for l in 0..LANES {
                    acc[l] = $madd(w[l], x[l], acc[l]);
                }
            }
            let mut sum: f32 = acc.iter().sum();
            for (w, x) in wr.iter().zip(xr) {
                sum += w * x;
            }
            sum
        }

        #[inline(always)]
        fn $i8_name(w: &[i8], x: &[f32]) -> f32 {
            let mut acc = [0f32; LANES];
            let (wc, wr) = w.split_at(w.len() / LANES * LANES);
            let (xc, xr) = x.split_at(wc.len());
            for (w, x) in wc.chunks_exact(LANES).zip(xc.chunks_exact(LANES)) {
                for l in 0..LANES {
                    acc[l] = $madd(w[l] as f32, x[l], acc[l]);
                }
            }
            let mut sum: f32 = acc.iter().sum();
            for (w, x) in wr.iter().zip(xr) {
                sum += *w as f32 * x;
            }
            sum
        }
    };
}

dot_kernels!(dot_f32_portable, dot_i8_portable, madd_plain);

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::LANES;
    dot_kernels!(dot_f32_inner, dot_i8_inner, f32::mul_add);

    /// Rows `rows` of `w` (each `cols` long) times each of `inputs`, into `out[i][r]`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows_f32(w: &[f32], cols: usize, inputs: &[&[f32]], out: &mut [&mut [f32]]) {
        for (r, row) in w.chunks_exact(cols).enumerate() {
            for (x, o) in inputs.iter().zip(out.iter_mut()) {
                o[r] = dot_f32_inner(row, x);
            }
        }
    }

    /// As [`rows_f32`], for int8 rows (unscaled).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows_i8(w: &[i8], cols: usize, inputs: &[&[f32]], out: &mut [&mut [f32]]) {
        for (r, row) in w.chunks_exact(cols).enumerate() {
            for (x, o) in inputs.iter().zip(out.iter_mut()) {
                o[r] = dot_i8_inner(row, x);
            }
        }
    }

    /// `Σ_t weights[t] · rows[t]` into `out` (rows of `out.len()`, `stride` apart).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn weighted_sum(weights: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
        super::weighted_sum_portable(weights, rows, stride, out)
    }

    /// `out[t] = scale · q · rows[t]` for each row `t` (`stride` apart, `q.len()` long).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn scores(q: &[f32], rows: &[f32], stride: usize, scale: f32, out: &mut [f32]) {
        for (t, o) in out.iter_mut().enumerate() {
            let k = &rows[t * stride..t * stride + q.len()];
            *o = dot_f32_inner(q, k) * scale;
        }
    }
}

fn rows_f32_portable(w: &[f32], cols: usize, inputs: &[&[f32]], out: &mut [&mut [f32]]) {
    for (r, row) in w.chunks_exact(cols).enumerate() {
        for (x, o) in inputs.iter().zip(out.iter_mut()) {
            o[r] = dot_f32_portable(row, x);
        }
    }
}

fn rows_i8_portable(w: &[i8], cols: usize, inputs: &[&[f32]], out: &mut [&mut [f32]]) {
    for (r, row) in w.chunks_exact(cols).enumerate() {
        for (x, o) in inputs.iter().zip(out.iter_mut()) {
            o[r] = dot_i8_portable(row, x);
        }
    }
}

#[inline(always)]
fn weighted_sum_portable(weights: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    out.fill(0.0);
    let n = out.len();
    for (t, &w) in weights.iter().enumerate() {
        let row = &rows[t * stride..t * stride + n];
        for (o, v) in out.iter_mut().zip(row) {
            *o += w * v;
        }
    }
}

fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `out[t] = scale · (q · rows[t])`, rows `stride` apart: attention scores of one head.
pub fn scores(q: &[f32], rows: &[f32], stride: usize, scale: f32, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected above.
        return unsafe { avx2::scores(q, rows, stride, scale, out) };
    }
    for (t, o) in out.iter_mut().enumerate() {
        *o = dot_f32_portable(q, &rows[t * stride..t * stride + q.len()]) * scale;
    }
}

#[inline(always)]
fn scores_t_portable(q: &[f32], keys_t: &[f32], scale: f32, out: &mut [f32]) {
    out.fill(0.0);
    let frames = out.len();
    for (qi, row) in q.iter().zip(keys_t.chunks_exact(frames)) {
        let qi = qi * scale;
        for (o, k) in out.iter_mut().zip(row) {
            *o += qi * k;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2_scores {
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn scores_t(q: &[f32], keys_t: &[f32], scale: f32, out: &mut [f32]) {
        super::scores_t_portable(q, keys_t, scale, out)
    }
}

/// `out[t] = scale · (q · key[t])` with the keys transposed (`keys_t`: `q.len()` rows of
/// `out.len()`): one head's scores over many frames, as whole-row sums with no reductions.
pub fn scores_t(q: &[f32], keys_t: &[f32], scale: f32, out: &mut [f32]) {
    assert_eq!(keys_t.len(), q.len() * out.len(), "transposed keys");
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected above.
        return unsafe { avx2_scores::scores_t(q, keys_t, scale, out) };
    }
    scores_t_portable(q, keys_t, scale, out)
}

/// `out = Σ_t weights[t] · rows[t]`, rows `stride` apart: one head's attention output.
pub fn weighted_sum(weights: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected above.
        return unsafe { avx2::weighted_sum(weights, rows, stride, out) };
    }
    weighted_sum_portable(weights, rows, stride, out)
}

/// A pointer to output rows that parallel tasks write disjoint column ranges of.
struct Outputs(*mut f32);
// SAFETY: tasks write disjoint ranges of the rows (see `Matrix::apply`).
unsafe impl Send for Outputs {}
unsafe impl Sync for Outputs {}

impl Matrix {
    /// A matrix from row-major float32 weights, stored at `precision`.
    pub fn new(
        rows: usize,
        cols: usize,
        data: Vec<f32>,
        bias: Option<Vec<f32>>,
        precision: Precision,
    ) -> Matrix {
        assert_eq!(data.len(), rows * cols, "matrix data");
        if let Some(b) = &bias {
            assert_eq!(b.len(), rows, "bias length");
        }
        let weights = match precision {
            Precision::Float32 => Weights::F32(data),
            Precision::Int8 => {
                // A few hundred rows per task, on every core: the vocabulary's embeddings
                // alone are millions of weights.
                let cols = cols.max(1);
                let rows_per_task = (1 << 16) / cols + 1;
                let mut q = vec![0i8; data.len()];
                let mut scales = vec![0f32; rows];
                q.par_chunks_mut(rows_per_task * cols)
                    .zip(scales.par_chunks_mut(rows_per_task))
                    .zip(data.par_chunks(rows_per_task * cols))
                    .for_each(|((q, scales), data)| {
                        let rows = q.chunks_exact_mut(cols).zip(data.chunks_exact(cols));
                        for ((q, row), scale) in rows.zip(scales) {
                            let inverse;
                            (*scale, inverse) = row_scale(row);
                            for (q, v) in q.iter_mut().zip(row) {
                                *q = round_to_i8(v * inverse);
                            }
                        }
                    });
                Weights::I8 { q, scales }
            }
        };
        Matrix {
            rows,
            cols,
            weights,
            bias,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes held by the weights (measured by the test of int8 storage).
    #[cfg(test)]
    pub fn weight_bytes(&self) -> usize {
        match &self.weights {
            Weights::F32(w) => w.len() * 4,
            Weights::I8 { q, scales } => q.len() + scales.len() * 4,
        }
    }

    /// Row `r`, as float32, into `out`.
    pub fn row_into(&self, r: usize, out: &mut [f32]) {
        let span = r * self.cols..(r + 1) * self.cols;
        match &self.weights {
            Weights::F32(w) => out.copy_from_slice(&w[span]),
            Weights::I8 { q, scales } => {
                for (o, &v) in out.iter_mut().zip(&q[span]) {
                    *o = v as f32 * scales[r];
                }
            }
        }
    }

    /// `out[i] = W · inputs[i] + b` for each input (`cols` long); each `out[i]` is `rows` long.
    pub fn apply(&self, inputs: &[&[f32]], out: &mut [&mut [f32]]) {
        assert_eq!(inputs.len(), out.len());
        for (x, o) in inputs.iter().zip(out.iter()) {
            assert_eq!(x.len(), self.cols, "input length");
            assert_eq!(o.len(), self.rows, "output length");
        }
        let work = self.rows * self.cols * inputs.len();
        let tasks = if work >= PARALLEL_WORK {
            rayon::current_num_threads().max(1) * 4
        } else {
            1
        };
        let chunk = self.rows.div_ceil(tasks).max(1);
        if tasks == 1 {
            self.apply_rows(0..self.rows, inputs, out);
        } else {
            let ptrs: Vec<Outputs> = out.iter_mut().map(|o| Outputs(o.as_mut_ptr())).collect();
            (0..self.rows.div_ceil(chunk))
                .into_par_iter()
                .for_each(|c| {
                    let span = c * chunk..((c + 1) * chunk).min(self.rows);
                    // SAFETY: each task gets its own range of rows, inside every output (checked
                    // to be `rows` long above), and the outputs outlive the parallel loop.
                    let mut parts: Vec<&mut [f32]> = ptrs
                        .iter()
                        .map(|p| unsafe {
                            std::slice::from_raw_parts_mut(p.0.add(span.start), span.len())
                        })
                        .collect();
                    self.apply_rows_into(span, inputs, &mut parts);
                });
        }
    }

    fn apply_rows(&self, span: std::ops::Range<usize>, inputs: &[&[f32]], out: &mut [&mut [f32]]) {
        let mut parts: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[span.clone()]).collect();
        self.apply_rows_into(span, inputs, &mut parts);
    }

    /// Rows `span` into `parts` (each `span.len()` long).
    fn apply_rows_into(
        &self,
        span: std::ops::Range<usize>,
        inputs: &[&[f32]],
        parts: &mut [&mut [f32]],
    ) {
        let cols = self.cols;
        let elements = span.start * cols..span.end * cols;
        match &self.weights {
            Weights::F32(w) => {
                let w = &w[elements];
                #[cfg(target_arch = "x86_64")]
                if has_avx2() {
                    // SAFETY: AVX2 and FMA were detected.
                    unsafe { avx2::rows_f32(w, cols, inputs, parts) };
                } else {
                    rows_f32_portable(w, cols, inputs, parts);
                }
                #[cfg(not(target_arch = "x86_64"))]
                rows_f32_portable(w, cols, inputs, parts);
            }
            Weights::I8 { q, scales } => {
                let q = &q[elements];
                #[cfg(target_arch = "x86_64")]
                if has_avx2() {
                    // SAFETY: AVX2 and FMA were detected.
                    unsafe { avx2::rows_i8(q, cols, inputs, parts) };
                } else {
                    rows_i8_portable(q, cols, inputs, parts);
                }
                #[cfg(not(target_arch = "x86_64"))]
                rows_i8_portable(q, cols, inputs, parts);
                let scales = &scales[span.clone()];
                for part in parts.iter_mut() {
                    for (o, s) in part.iter_mut().zip(scales) {
                        *o *= s;
                    }
                }
            }
        }
        if let Some(bias) = &self.bias {
            let bias = &bias[span];
            for part in parts.iter_mut() {
                for (o, b) in part.iter_mut().zip(bias) {
                    *o += b;
                }
            }
        }
    }
}

/// Layer normalization in place (Whisper's epsilon, 1e-5).
pub fn layer_norm(x: &[f32], gamma: &[f32], beta: &[f32], out: &mut [f32]) {
    let n = x.len() as f32;
    let mean = x.iter().sum::<f32>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + 1e-5).sqrt();
    for (((o, v), g), b) in out.iter_mut().zip(x).zip(gamma).zip(beta) {
        *o = (v - mean) * inv * g + b;
    }
}

/// `e^x` to about two units in the last place, without branches so that loops over it
/// vectorize (Cephes' polynomial after reducing to `2^n · e^r`). Clamped to float range: very
/// negative inputs (masked scores, `-inf`) give about 1e-38 rather than 0.
#[inline(always)]
fn exp_fast(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.7);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * r * r + r + 1.0;
    // 2^n from the bits of n + 1.5·2^23, whose low mantissa bits hold the integer n (the shift
    // drops the rest): unlike `n as i32`, which saturates and so converts one at a time, this
    // vectorizes.
    let n_bits = (n + 12_582_912.0).to_bits();
    y * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

/// The error function to about 1.5e-7 (Abramowitz & Stegun 7.1.26), branch-free.
#[inline(always)]
fn erf_fast(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152_1) * t + 1.421_413_7) * t - 0.284_496_74) * t
        + 0.254_829_6)
        * t;
    (1.0 - poly * exp_fast(-a * a)).copysign(x)
}

#[inline(always)]
fn gelu_portable(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf_fast(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

#[inline(always)]
fn softmax_portable(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = exp_fast(*v - max);
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// As [`softmax_portable`], with the maximum and the sum taken in `LANES` independent lanes so
/// that the exponentials vectorize too (an in-order sum keeps them one at a time). The sum's
/// order differs, within rounding; for the encoder's long rows of scores.
#[inline(always)]
fn softmax_lanes_portable(x: &mut [f32]) {
    let mut lane_max = [f32::NEG_INFINITY; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (m, v) in lane_max.iter_mut().zip(chunk) {
            *m = m.max(*v);
        }
    }
    let max = lane_max
        .iter()
        .chain(chunks.remainder())
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    let mut lane_sum = [0f32; LANES];
    let mut chunks = x.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (s, v) in lane_sum.iter_mut().zip(chunk) {
            *v = exp_fast(*v - max);
            *s += *v;
        }
    }
    let mut sum: f32 = lane_sum.iter().sum();
    for v in chunks.into_remainder() {
        *v = exp_fast(*v - max);
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

#[inline(always)]
fn log_sum_exp_portable(x: &[f32]) -> f32 {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return max;
    }
    // Terms below 1e-37 (masked tokens) are noise to the sum, not signal.
    let sum: f32 = x.iter().map(|v| exp_fast(v - max)).sum();
    max + sum.ln()
}

#[cfg(target_arch = "x86_64")]
mod avx2_elementwise {
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn log_sum_exp(x: &[f32]) -> f32 {
        super::log_sum_exp_portable(x)
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn gelu(x: &mut [f32]) {
        super::gelu_portable(x)
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn softmax(x: &mut [f32]) {
        super::softmax_portable(x)
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn softmax_lanes(x: &mut [f32]) {
        super::softmax_lanes_portable(x)
    }
}

/// `ln Σ e^x` (`-inf` for nothing but `-inf`).
pub fn log_sum_exp(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { avx2_elementwise::log_sum_exp(x) };
    }
    log_sum_exp_portable(x)
}

/// GELU with the error function, as Whisper is trained with.
pub fn gelu(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { avx2_elementwise::gelu(x) };
    }
    gelu_portable(x)
}

/// Softmax in place.
pub fn softmax(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { avx2_elementwise::softmax(x) };
    }
    softmax_portable(x)
}

/// Softmax in place, vectorized throughout (see [`softmax_lanes_portable`]).
fn softmax_lanes(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { avx2_elementwise::softmax_lanes(x) };
    }
    softmax_lanes_portable(x)
}

/// GELU over a large buffer, on every core.
pub fn gelu_parallel(x: &mut [f32]) {
    x.par_chunks_mut(1 << 14).for_each(gelu);
}

/// Softmax of each `width`-long row of a large buffer, on every core.
pub fn softmax_rows_parallel(x: &mut [f32], width: usize) {
    x.par_chunks_mut(width * ((1 << 14) / width.max(1)).max(16))
        .for_each(|rows| rows.chunks_exact_mut(width).for_each(softmax_lanes));
}

/// `x += y`.
pub fn add_into(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Repeatable values in [-0.5, 0.5) for the kernels' tests (a linear congruential sequence).
#[cfg(test)]
pub(super) fn pseudo_random(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            (s >> 8) as f32 / (1 << 24) as f32 - 0.5
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(rows: usize, cols: usize, w: &[f32], b: &[f32], x: &[f32]) -> Vec<f32> {
        (0..rows)
            .map(|r| (0..cols).map(|c| w[r * cols + c] * x[c]).sum::<f32>() + b[r])
            .collect()
    }

    #[test]
    fn float_and_int8_matrices_multiply_like_the_definition_in_one_and_many_threads() {
        // Sizes with tails past the 16 lanes, small (one thread) and large (parallel).
        for (rows, cols) in [(7, 37), (1031, 517)] {
            let w = pseudo_random(rows * cols, 1);
            let b = pseudo_random(rows, 2);
            let xs: Vec<Vec<f32>> = (0..3).map(|i| pseudo_random(cols, 10 + i)).collect();
            for precision in [Precision::Float32, Precision::Int8] {
                let m = Matrix::new(rows, cols, w.clone(), Some(b.clone()), precision);
                let inputs: Vec<&[f32]> = xs.iter().map(|x| x.as_slice()).collect();
                let mut outs = vec![vec![0f32; rows]; 3];
                let mut refs: Vec<&mut [f32]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
                m.apply(&inputs, &mut refs);
                // int8 rows: each weight is off by at most half a step of its row's scale.
                let tolerance = match precision {
                    Precision::Float32 => 1e-4,
                    Precision::Int8 => 0.5 / 127.0 * 0.5 * cols as f32 * 0.5,
                };
                for (x, o) in xs.iter().zip(&outs) {
                    let want = reference(rows, cols, &w, &b, x);
                    for (a, e) in o.iter().zip(&want) {
                        assert!(
                            (a - e).abs() <= tolerance,
                            "{precision:?} {rows}x{cols}: {a} vs {e}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn int8_rows_keep_their_values_to_a_step_of_their_scale() {
        let w = vec![1.0, -0.5, 0.25, 0.0, 0.0, 0.0];
        let m = Matrix::new(2, 3, w.clone(), None, Precision::Int8);
        let mut row = vec![0.0; 3];
        m.row_into(0, &mut row);
        for (a, e) in row.iter().zip(&w[..3]) {
            assert!((a - e).abs() <= 1.0 / 254.0, "{a} vs {e}");
        }
        m.row_into(1, &mut row);
        assert_eq!(row, vec![0.0; 3], "an all-zero row stays zero");
        assert_eq!(m.weight_bytes(), 6 + 8);
    }

    #[test]
    fn fast_exp_and_erf_match_the_library_functions() {
        let mut worst_exp = 0f32;
        let mut worst_erf = 0f32;
        for i in -8000..=8000 {
            let x = i as f32 / 100.0;
            let e = x.exp();
            worst_exp = worst_exp.max(((exp_fast(x) - e) / e).abs());
            let x = x / 10.0;
            worst_erf = worst_erf.max((erf_fast(x) - libm::erff(x)).abs());
        }
        assert!(worst_exp < 3e-7, "exp relative error {worst_exp}");
        assert!(worst_erf < 1e-6, "erf error {worst_erf}");
        assert!(exp_fast(f32::NEG_INFINITY) < 1e-37);
    }

    #[test]
    fn softmax_of_rows_in_lanes_matches_the_in_order_softmax() {
        for width in [1, 15, 16, 37, 1500] {
            let scores: Vec<f32> = pseudo_random(width * 20, width as u32)
                .iter()
                .map(|v| v * 30.0)
                .collect();
            let mut lanes = scores.clone();
            softmax_rows_parallel(&mut lanes, width);
            let mut in_order = scores;
            in_order.chunks_exact_mut(width).for_each(softmax);
            for (a, e) in lanes.iter().zip(&in_order) {
                // Sums of up to 1500 terms in a different order: a few units of rounding each.
                assert!(
                    (a - e).abs() <= 1e-5 * e + 1e-9,
                    "width {width}: {a} vs {e}"
                );
            }
        }
    }

    #[test]
    fn gelu_matches_known_values() {
        let mut x = vec![-3.0, -1.0, 0.0, 1.0, 3.0];
        gelu(&mut x);
        for (a, e) in x
            .iter()
            .zip([-0.0040496, -0.1586553, 0.0, 0.8413447, 2.9959503])
        {
            assert!((a - e).abs() < 1e-6, "{a} vs {e}");
        }
    }

    #[test]
    fn attention_helpers_score_and_sum_rows() {
        let rows = vec![1.0, 2.0, 9.0, 3.0, 4.0, 9.0]; // two rows of 2, stride 3
        let mut s = vec![0.0; 2];
        scores(&[1.0, 1.0], &rows, 3, 0.5, &mut s);
        assert_eq!(s, vec![1.5, 3.5]);
        let mut out = vec![0.0; 2];
        weighted_sum(&[0.25, 0.75], &rows, 3, &mut out);
        assert_eq!(out, vec![2.5, 3.5]);
        // Transposed keys: the same two rows as columns.
        let keys_t = vec![1.0, 4.0, 2.0, 9.0];
        let mut s_t = vec![0.0; 2];
        scores_t(&[1.0, 0.5], &keys_t, 2.0, &mut s_t);
        assert_eq!(s_t, vec![2.0 + 2.0, 8.0 + 9.0]);
        let mut p = vec![0.0, 0.0];
        softmax(&mut p);
        assert_eq!(p, vec![0.5, 0.5]);
    }
}
