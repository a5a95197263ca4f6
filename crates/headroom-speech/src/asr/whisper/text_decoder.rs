//! Whisper's text decoder as a hand-written step: token embeddings plus positions, blocks of
//! causal self-attention over a per-sequence cache, cross-attention over the window's audio
//! and an MLP, then logits from the embedding matrix.
//!
//! A step feeds any number of (sequence, token) entries at once, so the prompt of one
//! sequence, one token for each of several beams, or a whole window's text for alignment all
//! share one pass over the weights. Entries of one sequence are fed in order and each sees the
//! ones before it. The weights are [`Matrix`] values (int8 or float32); the caches and the
//! scratch buffers are reused from step to step.

use super::kernels::{self, Matrix};
use rayon::prelude::*;

/// Layer-norm parameters.
pub struct Norm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

impl Norm {
    fn apply(&self, x: &[f32], out: &mut [f32]) {
        kernels::layer_norm(x, &self.gamma, &self.beta, out)
    }
}

/// One decoder block's weights.
pub struct Block {
    pub self_norm: Norm,
    /// Queries, keys and values stacked: `3d × d`.
    pub qkv: Matrix,
    pub self_out: Matrix,
    pub cross_norm: Norm,
    pub cross_q: Matrix,
    pub cross_out: Matrix,
    pub mlp_norm: Norm,
    pub up: Matrix,
    pub down: Matrix,
}

/// The decoder's weights.
pub struct TextDecoder {
    pub d: usize,
    pub heads: usize,
    pub embeddings: Matrix,
    /// `n_text_ctx × d`.
    pub positions: Vec<f32>,
    pub blocks: Vec<Block>,
    pub norm: Norm,
}

/// One window's audio as each block's cross-attention sees it, laid out head by head so that
/// a step reads each head's memory in order: per block, keys as `heads × dh × frames` (a
/// query's scores are then sums of whole rows) and values as `heads × frames × dh`.
pub struct CrossKv {
    pub keys_t: Vec<Vec<f32>>,
    pub values: Vec<Vec<f32>>,
    pub frames: usize,
}

impl CrossKv {
    /// No blocks yet, for `frames` audio frames.
    pub fn new(frames: usize) -> Self {
        CrossKv {
            keys_t: Vec::new(),
            values: Vec::new(),
            frames,
        }
    }

    /// The next block's keys and values, given as `frames × d` rows.
    pub fn push_block(&mut self, keys: &[f32], values: &[f32], heads: usize) {
        let frames = self.frames;
        let d = keys.len() / frames.max(1);
        let dh = d / heads.max(1);
        let mut keys_t = vec![0f32; keys.len()];
        let mut by_head = vec![0f32; values.len()];
        for f in 0..frames {
            for h in 0..heads {
                let row = f * d + h * dh;
                for i in 0..dh {
                    keys_t[(h * dh + i) * frames + f] = keys[row + i];
                }
                by_head[(h * frames + f) * dh..(h * frames + f + 1) * dh]
                    .copy_from_slice(&values[row..row + dh]);
            }
        }
        self.keys_t.push(keys_t);
        self.values.push(by_head);
    }
}

/// One sequence's self-attention keys and values so far, per block, `len × d`.
#[derive(Clone, Default)]
pub struct SelfCache {
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
}

impl SelfCache {
    /// Tokens fed so far.
    pub fn len(&self, d: usize) -> usize {
        self.keys.first().map_or(0, |k| k.len() / d)
    }

    /// Becomes a copy of `other`, reusing this cache's memory.
    pub fn copy_from(&mut self, other: &SelfCache) {
        self.keys.resize_with(other.keys.len(), Vec::new);
        self.values.resize_with(other.values.len(), Vec::new);
        for (a, b) in self.keys.iter_mut().zip(&other.keys) {
            a.clear();
            a.extend_from_slice(b);
        }
        for (a, b) in self.values.iter_mut().zip(&other.values) {
            a.clear();
            a.extend_from_slice(b);
        }
    }
}

/// Cross-attention scores (scaled, before softmax) of chosen heads, entry by entry: what word
/// alignment reads.
pub struct Capture {
    /// (block, head) pairs.
    pub heads: Vec<(usize, usize)>,
    /// Per head: `entries × frames`.
    pub scores: Vec<Vec<f32>>,
}

/// Buffers a step reuses.
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    qkv: Vec<f32>,
    att: Vec<f32>,
    proj: Vec<f32>,
    up: Vec<f32>,
    scores: Vec<f32>,
    cross_scores: Vec<f32>,
}

fn rows(buf: &[f32], width: usize) -> Vec<&[f32]> {
    buf.chunks_exact(width).collect()
}

fn rows_mut(buf: &mut [f32], width: usize) -> Vec<&mut [f32]> {
    buf.chunks_exact_mut(width).collect()
}

impl TextDecoder {
    pub fn vocab(&self) -> usize {
        self.embeddings.rows()
    }

    pub fn max_tokens(&self) -> usize {
        self.positions.len() / self.d
    }

    pub fn new_cache(&self) -> SelfCache {
        SelfCache {
            keys: vec![Vec::new(); self.blocks.len()],
            values: vec![Vec::new(); self.blocks.len()],
        }
    }

    /// Feeds `entries` ((sequence, token), in order) to the sequences' caches. `logits_for`
    /// names entries (indices into `entries`) whose next-token logits go, in that order, into
    /// `logits` (each `vocab` long); `capture` records the chosen heads' cross-attention.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        cross: &CrossKv,
        caches: &mut [SelfCache],
        entries: &[(usize, u32)],
        logits_for: &[usize],
        logits: &mut [Vec<f32>],
        mut capture: Option<&mut Capture>,
        s: &mut Scratch,
    ) {
        let d = self.d;
        let n = entries.len();
        let dh = d / self.heads;
        let scale = (dh as f32).powf(-0.5);
        s.x.resize(n * d, 0.0);
        s.h.resize(n * d, 0.0);
        s.qkv.resize(n * 3 * d, 0.0);
        s.att.resize(n * d, 0.0);
        s.proj.resize(n * d, 0.0);
        s.up.resize(n * 4 * d, 0.0);
        // Positions: each entry comes after its sequence's cache and earlier entries.
        let mut next_pos: Vec<usize> = caches.iter().map(|c| c.len(d)).collect();
        for (e, &(seq, token)) in entries.iter().enumerate() {
            let pos = next_pos[seq];
            next_pos[seq] += 1;
            let x = &mut s.x[e * d..(e + 1) * d];
            self.embeddings.row_into(token as usize, x);
            kernels::add_into(x, &self.positions[pos * d..(pos + 1) * d]);
        }
        if let Some(c) = capture.as_deref_mut() {
            c.scores = vec![vec![0.0; n * cross.frames]; c.heads.len()];
        }
        for (layer, block) in self.blocks.iter().enumerate() {
            // Self-attention.
            for (x, h) in s.x.chunks_exact(d).zip(s.h.chunks_exact_mut(d)) {
                block.self_norm.apply(x, h);
            }
            block
                .qkv
                .apply(&rows(&s.h, d), &mut rows_mut(&mut s.qkv, 3 * d));
            for (e, &(seq, _)) in entries.iter().enumerate() {
                let qkv = &s.qkv[e * 3 * d..(e + 1) * 3 * d];
                let cache = &mut caches[seq];
                cache.keys[layer].extend_from_slice(&qkv[d..2 * d]);
                cache.values[layer].extend_from_slice(&qkv[2 * d..]);
                let len = cache.keys[layer].len() / d;
                s.scores.resize(len.max(s.scores.len()), 0.0);
                for head in 0..self.heads {
                    let span = head * dh..(head + 1) * dh;
                    let scores = &mut s.scores[..len];
                    kernels::scores(
                        &qkv[span.clone()],
                        &cache.keys[layer][span.start..],
                        d,
                        scale,
                        scores,
                    );
                    kernels::softmax(scores);
                    kernels::weighted_sum(
                        scores,
                        &cache.values[layer][span.start..],
                        d,
                        &mut s.att[e * d + span.start..e * d + span.end],
                    );
                }
            }
            block
                .self_out
                .apply(&rows(&s.att, d), &mut rows_mut(&mut s.proj, d));
            kernels::add_into(&mut s.x, &s.proj);
            // Cross-attention over the audio.
            for (x, h) in s.x.chunks_exact(d).zip(s.h.chunks_exact_mut(d)) {
                block.cross_norm.apply(x, h);
            }
            block
                .cross_q
                .apply(&rows(&s.h, d), &mut rows_mut(&mut s.proj, d));
            let keys_t = &cross.keys_t[layer];
            let values = &cross.values[layer];
            let frames = cross.frames;
            let head_size = dh * frames;
            // Each head on its own: its scores in a buffer of its own, its output in its own
            // columns of the entry's row. Alignment reads the scores before the softmax.
            s.cross_scores.resize(self.heads * frames, 0.0);
            for e in 0..n {
                let q = &s.proj[e * d..(e + 1) * d];
                let att = &mut s.att[e * d..(e + 1) * d];
                let capturing = capture.is_some();
                let attend = |head: usize, scores: &mut [f32], out: &mut [f32], weigh: bool| {
                    if !weigh || !capturing {
                        let keys = &keys_t[head * head_size..(head + 1) * head_size];
                        kernels::scores_t(&q[head * dh..(head + 1) * dh], keys, scale, scores);
                    }
                    if weigh {
                        kernels::softmax(scores);
                        let rows = &values[head * head_size..(head + 1) * head_size];
                        kernels::weighted_sum(scores, rows, dh, out);
                    }
                };
                if let Some(c) = capture.as_deref_mut() {
                    s.cross_scores
                        .par_chunks_mut(frames)
                        .zip(att.par_chunks_mut(dh))
                        .enumerate()
                        .for_each(|(head, (scores, out))| attend(head, scores, out, false));
                    for (i, &(l, h)) in c.heads.iter().enumerate() {
                        if l == layer {
                            c.scores[i][e * frames..(e + 1) * frames]
                                .copy_from_slice(&s.cross_scores[h * frames..(h + 1) * frames]);
                        }
                    }
                }
                s.cross_scores
                    .par_chunks_mut(frames)
                    .zip(att.par_chunks_mut(dh))
                    .enumerate()
                    .for_each(|(head, (scores, out))| attend(head, scores, out, true));
            }
            block
                .cross_out
                .apply(&rows(&s.att, d), &mut rows_mut(&mut s.proj, d));
            kernels::add_into(&mut s.x, &s.proj);
            // MLP.
            for (x, h) in s.x.chunks_exact(d).zip(s.h.chunks_exact_mut(d)) {
                block.mlp_norm.apply(x, h);
            }
            block
                .up
                .apply(&rows(&s.h, d), &mut rows_mut(&mut s.up, 4 * d));
            kernels::gelu(&mut s.up);
            block
                .down
                .apply(&rows(&s.up, 4 * d), &mut rows_mut(&mut s.proj, d));
            kernels::add_into(&mut s.x, &s.proj);
        }
        if logits_for.is_empty() {
            return;
        }
        s.h.resize(n.max(logits_for.len()) * d, 0.0);
        for (i, &e) in logits_for.iter().enumerate() {
            self.norm
                .apply(&s.x[e * d..(e + 1) * d], &mut s.h[i * d..(i + 1) * d]);
        }
        let wanted = logits_for.len();
        let inputs = rows(&s.h[..wanted * d], d);
        let mut outs: Vec<&mut [f32]> = logits
            .iter_mut()
            .take(wanted)
            .map(|l| {
                l.resize(self.vocab(), 0.0);
                l.as_mut_slice()
            })
            .collect();
        self.embeddings.apply(&inputs, &mut outs);
    }
}
