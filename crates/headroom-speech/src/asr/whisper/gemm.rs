//! Int8 matrix products for the encoder's projections, on AVX-512 VNNI.
//!
//! The encoder multiplies a whole window's frames (1500 rows) by each projection, so unlike a
//! decoding step it is bound by arithmetic, not memory: one `vpdpbusd` does 64 byte
//! multiply-adds where a float FMA does 16. As in CTranslate2, weights are int8 with a scale
//! per output row, fixed at load, and each input row is quantized with a scale of its own when
//! it is multiplied.
//!
//! VNNI multiplies unsigned bytes by signed ones, so inputs are shifted by 128 into unsigned
//! bytes, and the shift's share of each sum, `128 · Σ_c q[r][c]`, is precomputed per output
//! row and subtracted.

use super::kernels::{round_to_i8, row_scale};
use rayon::prelude::*;

/// Int32 lanes in a 512-bit register: output rows per register.
const LANES: usize = 16;
/// Inputs that one VNNI lane sums: 4 bytes per int32 lane.
const GROUP: usize = 4;
/// Bytes of packed weights per (block of 16 output rows, group of 4 inputs).
const BLOCK_BYTES: usize = LANES * GROUP;
/// Registers of output rows per tile: 4 × 16 = 64 output rows, a "panel".
const PANEL_BLOCKS: usize = 4;
/// Input rows per tile. 6 × 4 accumulators, 4 weight registers and a broadcast fill 29 of the
/// 32 vector registers, so the inner loop never spills.
const TILE_ROWS: usize = 6;
/// Bytes of weights that one pass over a task's rows uses (whole panels, at least one): a
/// share of the core's L2 cache, so they stay there while the rows go by, and the outputs are
/// written in runs of several panels.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const PASS_WEIGHT_BYTES: usize = 256 * 1024;
/// An input byte that stands for zero (inputs are shifted by 128).
const ZERO_POINT: u8 = 128;
/// Parallel tasks per thread, so that a slow core does not hold the others up.
const TASKS_PER_THREAD: usize = 8;

/// Whether this CPU runs the int8 kernel (AVX-512 with VNNI). Without it the portable
/// implementation gives the same results far more slowly than a float32 product, so callers
/// should keep their weights in float then.
pub fn int8_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A linear projection (`y = W·x + b`, `W` of `rows × cols`) with int8 weights, symmetric per
/// row: `W[r][c] ≈ scales[r] · q[r][c]`, `q` in [-127, 127].
///
/// `packed` holds `q` in panels of up to 64 output rows (the last panel may hold fewer
/// 16-row blocks); within a panel, for each group of 4 inputs, each block's 16 rows × 4
/// inputs (64 bytes, one register). A tile thus reads its weights as one forward stream.
/// Rows past `rows` and inputs past `cols` are zero.
pub struct QuantizedLinear {
    rows: usize,
    cols: usize,
    packed: Vec<i8>,
    /// Per output row, padded to whole blocks with zeros (as are the two below), so a block's
    /// 16 lanes always load in bounds.
    scales: Vec<f32>,
    /// `128 · Σ_c q[r][c]`: the shifted inputs' excess in each row's sum.
    compensation: Vec<i32>,
    bias: Vec<f32>,
}

impl QuantizedLinear {
    /// Quantizes row-major float32 weights (`rows × cols`) and an optional bias (`rows` long).
    pub fn new(rows: usize, cols: usize, weights: &[f32], bias: Option<&[f32]>) -> Self {
        assert!(rows > 0 && cols > 0, "an empty projection");
        assert_eq!(weights.len(), rows * cols, "weights of {rows} × {cols}");
        let padded_rows = rows.next_multiple_of(LANES);
        let mut layer = QuantizedLinear {
            rows,
            cols,
            packed: vec![0; padded_rows * cols.next_multiple_of(GROUP)],
            scales: vec![0.0; padded_rows],
            compensation: vec![0; padded_rows],
            bias: vec![0.0; padded_rows],
        };
        if let Some(bias) = bias {
            assert_eq!(bias.len(), rows, "bias length");
            layer.bias[..rows].copy_from_slice(bias);
        }
        // A panel at a time, on every core: each panel's weights, scales and sums are
        // contiguous.
        let panel_rows = PANEL_BLOCKS * LANES;
        let panel_bytes = PANEL_BLOCKS * BLOCK_BYTES * layer.groups();
        layer
            .packed
            .par_chunks_mut(panel_bytes)
            .zip(layer.scales.par_chunks_mut(panel_rows))
            .zip(layer.compensation.par_chunks_mut(panel_rows))
            .zip(weights.par_chunks(panel_rows * cols))
            .for_each(|(((packed, scales), compensation), weights)| {
                let blocks = weights.len().div_ceil(cols * LANES);
                for (r, row) in weights.chunks_exact(cols).enumerate() {
                    let (scale, inverse) = row_scale(row);
                    let mut sum = 0i32;
                    for (c, v) in row.iter().enumerate() {
                        let q = round_to_i8(v * inverse);
                        packed[offset_in_panel(blocks, r, c)] = q;
                        sum += q as i32;
                    }
                    scales[r] = scale;
                    compensation[r] = ZERO_POINT as i32 * sum;
                }
            });
        layer
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Output width.
    pub fn rows(&self) -> usize {
        self.rows
    }

    fn groups(&self) -> usize {
        self.cols.div_ceil(GROUP)
    }

    /// Bytes of one quantized input row: whole groups of 4.
    fn input_stride(&self) -> usize {
        self.groups() * GROUP
    }

    fn blocks(&self) -> usize {
        self.rows.div_ceil(LANES)
    }

    fn panels(&self) -> usize {
        self.blocks().div_ceil(PANEL_BLOCKS)
    }

    fn blocks_in_panel(&self, panel: usize) -> usize {
        PANEL_BLOCKS.min(self.blocks() - panel * PANEL_BLOCKS)
    }

    /// Where a panel's weights start (every panel before it is full).
    fn panel_start(&self, panel: usize) -> usize {
        panel * PANEL_BLOCKS * BLOCK_BYTES * self.groups()
    }

    /// Where `q[r][c]` is in `packed`.
    fn packed_index(&self, r: usize, c: usize) -> usize {
        let panel = r / (PANEL_BLOCKS * LANES);
        self.panel_start(panel)
            + offset_in_panel(self.blocks_in_panel(panel), r % (PANEL_BLOCKS * LANES), c)
    }

    /// `out[t] = W · x[t] + b` for each row `t` of `x` (`cols` wide); `out` is `rows` wide.
    /// On every core, in tasks of consecutive input rows.
    pub fn forward(&self, x: &[f32], out: &mut [f32]) {
        self.forward_with(x, out, int8_supported())
    }

    fn forward_with(&self, x: &[f32], out: &mut [f32], vnni: bool) {
        assert_eq!(x.len() % self.cols, 0, "input rows of {}", self.cols);
        let tokens = x.len() / self.cols;
        assert_eq!(
            out.len(),
            tokens * self.rows,
            "output rows of {}",
            self.rows
        );
        let tasks = rayon::current_num_threads().max(1) * TASKS_PER_THREAD;
        let chunk = tokens
            .div_ceil(tasks)
            .next_multiple_of(TILE_ROWS)
            .max(TILE_ROWS);
        x.par_chunks(chunk * self.cols)
            .zip(out.par_chunks_mut(chunk * self.rows))
            .for_each(|(x, out)| self.forward_rows(x, out, vnni));
    }

    /// One task's rows: quantized into a buffer of its own, then multiplied.
    fn forward_rows(&self, x: &[f32], out: &mut [f32], vnni: bool) {
        let tokens = x.len() / self.cols;
        let mut quantized = vec![ZERO_POINT; tokens * self.input_stride()];
        let mut input_scales = vec![0f32; tokens];
        #[cfg(target_arch = "x86_64")]
        if vnni {
            // SAFETY: `vnni` is only true where `int8_supported` found AVX-512 F, BW and VNNI.
            return unsafe {
                avx512::forward_rows(self, x, &mut quantized, &mut input_scales, out)
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = vnni; // Only x86-64 has the kernel.
        quantize_rows(x, self.cols, &mut quantized, &mut input_scales);
        self.multiply_portable(&quantized, &input_scales, out);
    }

    /// The reference product, one sum at a time, from the same quantized inputs and with the
    /// same arithmetic as the VNNI kernel (so the two agree exactly).
    fn multiply_portable(&self, quantized: &[u8], input_scales: &[f32], out: &mut [f32]) {
        let stride = self.input_stride();
        for ((row, &input_scale), out) in quantized
            .chunks_exact(stride)
            .zip(input_scales)
            .zip(out.chunks_exact_mut(self.rows))
        {
            for (r, o) in out.iter_mut().enumerate() {
                let sum: i32 = (0..self.cols)
                    .map(|c| row[c] as i32 * self.packed[self.packed_index(r, c)] as i32)
                    .sum();
                *o = ((sum - self.compensation[r]) as f32)
                    .mul_add(input_scale * self.scales[r], self.bias[r]);
            }
        }
    }
}

/// Where weight (`r`, `c`) is in a panel of `blocks` blocks, `r` counted from the panel's first
/// row.
fn offset_in_panel(blocks: usize, r: usize, c: usize) -> usize {
    let (block, lane) = (r / LANES, r % LANES);
    let (group, byte) = (c / GROUP, c % GROUP);
    (group * blocks + block) * BLOCK_BYTES + lane * GROUP + byte
}

/// Quantizes each `cols`-wide row of `x` to bytes shifted by 128 (`stride` apart in `out`,
/// the padding left as it is) with a scale per row: `x ≈ scale · (u − 128)`. Rounds half to
/// even, as the AVX-512 version does, so that the two give the same bytes for finite inputs.
fn quantize_rows(x: &[f32], cols: usize, out: &mut [u8], scales: &mut [f32]) {
    let stride = out.len() / scales.len().max(1);
    for ((row, out), scale) in x
        .chunks_exact(cols)
        .zip(out.chunks_exact_mut(stride))
        .zip(scales.iter_mut())
    {
        let inverse;
        (*scale, inverse) = row_scale(row);
        for (o, v) in out.iter_mut().zip(row) {
            *o = (round_to_i8(v * inverse) as i32 + ZERO_POINT as i32) as u8;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{
        QuantizedLinear, BLOCK_BYTES, GROUP, LANES, PANEL_BLOCKS, PASS_WEIGHT_BYTES, TILE_ROWS,
        ZERO_POINT,
    };
    use std::arch::x86_64::*;

    /// Quantizes `x` into `quantized` and `input_scales`, then multiplies.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn forward_rows(
        layer: &QuantizedLinear,
        x: &[f32],
        quantized: &mut [u8],
        input_scales: &mut [f32],
        out: &mut [f32],
    ) {
        quantize_rows(x, layer.cols, quantized, input_scales);
        multiply(layer, quantized, input_scales, out);
    }

    /// As [`super::quantize_rows`], 16 values at a time (the conversion rounds half to even).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn quantize_rows(x: &[f32], cols: usize, out: &mut [u8], scales: &mut [f32]) {
        let stride = out.len() / scales.len().max(1);
        assert!(stride >= cols);
        let (low, high) = (_mm512_set1_epi32(-127), _mm512_set1_epi32(127));
        let zero_point = _mm512_set1_epi32(ZERO_POINT as i32);
        for ((row, out), scale) in x
            .chunks_exact(cols)
            .zip(out.chunks_exact_mut(stride))
            .zip(scales.iter_mut())
        {
            let inverse;
            (*scale, inverse) = super::row_scale(row);
            let inverse = _mm512_set1_ps(inverse);
            for start in (0..cols).step_by(LANES) {
                let valid = LANES.min(cols - start);
                let mask: __mmask16 = (u32::MAX >> (32 - valid)) as u16;
                // SAFETY: the mask keeps the load within `row` and the store within the
                // row's `cols` bytes of `out` (at least `cols` long, checked above).
                unsafe {
                    let v = _mm512_maskz_loadu_ps(mask, row[start..].as_ptr());
                    let q = _mm512_cvtps_epi32(_mm512_mul_ps(v, inverse));
                    let q = _mm512_min_epi32(_mm512_max_epi32(q, low), high);
                    let u = _mm512_add_epi32(q, zero_point);
                    _mm512_mask_cvtepi32_storeu_epi8(out[start..].as_mut_ptr().cast(), mask, u);
                }
            }
        }
    }

    /// `out = W · inputs` for quantized inputs (`input_scales.len()` rows, `input_stride()`
    /// bytes apart), in passes over a few panels of weights: each tile of rows meets all of a
    /// pass's panels in turn, so the panels stay in cache while the rows stream past them.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn multiply(
        layer: &QuantizedLinear,
        quantized: &[u8],
        input_scales: &[f32],
        out: &mut [f32],
    ) {
        let tokens = input_scales.len();
        let stride = layer.input_stride();
        assert_eq!(quantized.len(), tokens * stride, "quantized inputs");
        assert_eq!(out.len(), tokens * layer.rows, "outputs");
        let panel_bytes = PANEL_BLOCKS * BLOCK_BYTES * layer.groups();
        let panels_per_pass = (PASS_WEIGHT_BYTES / panel_bytes).max(1);
        for first_panel in (0..layer.panels()).step_by(panels_per_pass) {
            let panels = first_panel..layer.panels().min(first_panel + panels_per_pass);
            for t in (0..tokens).step_by(TILE_ROWS) {
                for panel in panels.clone() {
                    let start = layer.panel_start(panel);
                    let blocks = layer.blocks_in_panel(panel);
                    let weights =
                        &layer.packed[start..start + blocks * BLOCK_BYTES * layer.groups()];
                    let tile = Tile {
                        layer,
                        weights,
                        first_output: panel * PANEL_BLOCKS * LANES,
                        inputs: &quantized[t * stride..],
                        input_scales: &input_scales[t..],
                        out: &mut out[t * layer.rows..],
                    };
                    // SAFETY (all arms): the caller guarantees the CPU features.
                    match blocks {
                        4 => unsafe { tile.run::<4>() },
                        3 => unsafe { tile.run::<3>() },
                        2 => unsafe { tile.run::<2>() },
                        _ => unsafe { tile.run::<1>() },
                    }
                }
            }
        }
    }

    /// Up to `TILE_ROWS` input rows against one panel of weights.
    struct Tile<'a> {
        layer: &'a QuantizedLinear,
        /// The panel's packed weights.
        weights: &'a [i8],
        first_output: usize,
        /// Quantized rows from the tile's first (the tile uses at most `TILE_ROWS`).
        inputs: &'a [u8],
        input_scales: &'a [f32],
        out: &'a mut [f32],
    }

    impl Tile<'_> {
        /// The tile's sums (`BLOCKS` registers of outputs per row), scaled, with the bias, into
        /// its rows of `out`.
        ///
        /// # Safety
        /// The CPU must have AVX-512 F, BW and VNNI.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        unsafe fn run<const BLOCKS: usize>(self) {
            let layer = self.layer;
            let groups = layer.groups();
            let stride = layer.input_stride();
            let rows = TILE_ROWS.min(self.input_scales.len());
            assert!(rows > 0 && self.inputs.len() >= rows * stride);
            assert_eq!(self.weights.len(), BLOCKS * BLOCK_BYTES * groups);
            assert!(self.out.len() >= rows * layer.rows);
            // A short tile repeats its last row rather than needing a kernel of its own; the
            // repeats' results are not stored.
            let row_start: [*const u8; TILE_ROWS] =
                std::array::from_fn(|m| self.inputs[m.min(rows - 1) * stride..].as_ptr());
            let mut sums = [[_mm512_setzero_si512(); BLOCKS]; TILE_ROWS];
            let mut weights = self.weights.as_ptr();
            for g in 0..groups {
                let mut w = [_mm512_setzero_si512(); BLOCKS];
                for (j, w) in w.iter_mut().enumerate() {
                    // SAFETY: group `g` of the panel is `BLOCKS` registers of weights, inside
                    // `self.weights` (its length is checked above).
                    *w = unsafe { _mm512_loadu_si512(weights.add(j * BLOCK_BYTES).cast()) };
                }
                for (row, sums) in row_start.iter().zip(sums.iter_mut()) {
                    // SAFETY: each row has `groups` groups of 4 bytes (checked above).
                    let input = unsafe { row.add(g * GROUP).cast::<i32>().read_unaligned() };
                    let input = _mm512_set1_epi32(input);
                    for (sum, w) in sums.iter_mut().zip(w) {
                        *sum = _mm512_dpbusd_epi32(*sum, input, w);
                    }
                }
                // SAFETY: stays within (or one past the end of) `self.weights`.
                weights = unsafe { weights.add(BLOCKS * BLOCK_BYTES) };
            }
            for j in 0..BLOCKS {
                let first = self.first_output + j * LANES;
                // SAFETY: the per-row vectors are padded to whole blocks, and `first` starts a
                // block of this layer.
                let (compensation, scales, bias) = unsafe {
                    (
                        _mm512_loadu_si512(
                            layer.compensation[first..first + LANES].as_ptr().cast(),
                        ),
                        _mm512_loadu_ps(layer.scales[first..first + LANES].as_ptr()),
                        _mm512_loadu_ps(layer.bias[first..first + LANES].as_ptr()),
                    )
                };
                let valid = LANES.min(layer.rows - first);
                let mask: __mmask16 = (u32::MAX >> (32 - valid)) as u16;
                for (m, row_sums) in sums.iter().enumerate().take(rows) {
                    let exact = _mm512_cvtepi32_ps(_mm512_sub_epi32(row_sums[j], compensation));
                    let scale = _mm512_mul_ps(_mm512_set1_ps(self.input_scales[m]), scales);
                    let y = _mm512_fmadd_ps(exact, scale, bias);
                    let at = m * layer.rows + first;
                    // SAFETY: the mask keeps the store within row `m`'s `valid` outputs from
                    // `first`, inside `self.out` (its length is checked above).
                    unsafe { _mm512_mask_storeu_ps(self.out[at..].as_mut_ptr(), mask, y) };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asr::whisper::kernels::pseudo_random;

    /// Shapes with every edge: rows past whole tiles, outputs past whole registers and
    /// panels, inputs past whole groups of 4 (and of 64 bytes).
    const SHAPES: [(usize, usize, usize); 7] = [
        (1, 1, 1),
        (5, 17, 3),
        (7, 70, 67),
        (13, 64, 130),
        (6, 129, 4),
        (25, 200, 385),
        (100, 48, 513),
    ];

    /// The kernel this CPU runs ([`QuantizedLinear::forward`]: AVX-512 VNNI where the CPU has
    /// it) gives the portable reference's results bit for bit; where it has VNNI, the VNNI
    /// kernel is also run by name, so a machine with it tests it.
    #[test]
    fn the_kernel_this_cpu_runs_equals_the_portable_reference_exactly() {
        for (i, &(tokens, rows, cols)) in SHAPES.iter().enumerate() {
            let seed = i as u32 * 7;
            let layer = QuantizedLinear::new(
                rows,
                cols,
                &pseudo_random(rows * cols, seed),
                Some(&pseudo_random(rows, seed + 1)),
            );
            let mut x = pseudo_random(tokens * cols, seed + 2);
            // Large inputs, and a row of zeros (scale 0).
            x.iter_mut().step_by(5).for_each(|v| *v *= 40.0);
            x[..cols].fill(0.0);
            let mut portable = vec![f32::NAN; tokens * rows];
            layer.forward_with(&x, &mut portable, false);
            let mut in_use = vec![f32::NAN; tokens * rows];
            layer.forward(&x, &mut in_use);
            let mut kernels = vec![("the kernel in use", in_use)];
            if int8_supported() {
                let mut vnni = vec![f32::NAN; tokens * rows];
                layer.forward_with(&x, &mut vnni, true);
                kernels.push(("VNNI", vnni));
            }
            for (kernel, got) in kernels {
                let same = got
                    .iter()
                    .zip(&portable)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{kernel}, {tokens} × {rows} × {cols}: {got:?} vs {portable:?}"
                );
            }
        }
    }

    #[test]
    fn int8_product_is_close_to_the_float_product() {
        for (i, &(tokens, rows, cols)) in SHAPES.iter().enumerate().skip(2) {
            let seed = 100 + i as u32 * 7;
            let w = pseudo_random(rows * cols, seed);
            let b = pseudo_random(rows, seed + 1);
            let x = pseudo_random(tokens * cols, seed + 2);
            let layer = QuantizedLinear::new(rows, cols, &w, Some(&b));
            let mut got = vec![0f32; tokens * rows];
            layer.forward(&x, &mut got);
            let (mut error, mut norm) = (0f64, 0f64);
            for (t, got) in got.chunks_exact(rows).enumerate() {
                let x = &x[t * cols..(t + 1) * cols];
                for (r, &y) in got.iter().enumerate() {
                    let want = w[r * cols..(r + 1) * cols]
                        .iter()
                        .zip(x)
                        .map(|(w, x)| (w * x) as f64)
                        .sum::<f64>()
                        + b[r] as f64;
                    error += (y as f64 - want).powi(2);
                    norm += want * want;
                }
            }
            let relative = (error / norm).sqrt();
            assert!(
                relative < 0.01,
                "{tokens} × {rows} × {cols}: error {relative}"
            );
        }
    }

    #[test]
    fn zero_inputs_and_weights_give_the_bias() {
        let layer = QuantizedLinear::new(3, 5, &[0.0; 15], Some(&[1.0, -2.0, 0.5]));
        let mut out = vec![f32::NAN; 6];
        layer.forward(&[0.0; 10], &mut out);
        assert_eq!(out, vec![1.0, -2.0, 0.5, 1.0, -2.0, 0.5]);
        let mut out = vec![f32::NAN; 0];
        layer.forward(&[], &mut out);
    }
}
