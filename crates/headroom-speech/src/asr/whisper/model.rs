//! The Whisper network on candle, built straight from CTranslate2 variable names.
//!
//! Encoder: two convolutions (GELU), learned positions, pre-norm transformer blocks, final
//! norm. Decoder: token embeddings plus positions, blocks of causal self-attention (with a
//! key/value cache across decoding steps), cross-attention over the encoder output (keys and
//! values computed once per window) and an MLP; logits reuse the token embedding matrix.

use super::ct2::Ct2Model;
use candle_core::{DType, Device, IndexOp, Module, Tensor};
use candle_nn::{Conv1d, Conv1dConfig, LayerNorm, Linear};

pub type Result<T> = candle_core::Result<T>;

/// A tensor the model must have.
fn var(m: &Ct2Model, name: &str) -> Result<Tensor> {
    m.tensor(name).map_err(candle_core::Error::Msg)
}

/// Sizes read from the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    pub n_mels: usize,
    pub n_state: usize,
    pub n_heads: usize,
    pub n_audio_layers: usize,
    pub n_text_layers: usize,
    pub n_vocab: usize,
    pub n_text_ctx: usize,
    pub n_audio_ctx: usize,
}

fn linear(m: &Ct2Model, prefix: &str) -> Result<Linear> {
    let w = var(m, &format!("{prefix}/weight"))?;
    let b = m.tensors.get(&format!("{prefix}/bias")).cloned();
    Ok(Linear::new(w, b))
}

/// Splits a stacked projection (q,k,v or k,v) into `parts` linears along the output dim.
fn split_linear(m: &Ct2Model, prefix: &str, parts: usize) -> Result<Vec<Linear>> {
    let w = var(m, &format!("{prefix}/weight"))?;
    let b = m.tensors.get(&format!("{prefix}/bias")).cloned();
    let rows = (w.dim(0))? / parts;
    (0..parts)
        .map(|i| {
            let wi = (w.narrow(0, i * rows, rows))?;
            let bi = match &b {
                Some(b) => Some((b.narrow(0, i * rows, rows))?),
                None => None,
            };
            Ok(Linear::new(wi, bi))
        })
        .collect()
}

fn layer_norm(m: &Ct2Model, prefix: &str) -> Result<LayerNorm> {
    Ok(LayerNorm::new(
        var(m, &format!("{prefix}/gamma"))?,
        var(m, &format!("{prefix}/beta"))?,
        1e-5,
    ))
}

fn count_layers(m: &Ct2Model, stack: &str) -> usize {
    (0..)
        .take_while(|i| {
            m.tensors
                .contains_key(&format!("{stack}/layer_{i}/ffn/linear_0/weight"))
        })
        .count()
}

/// (b, t, d) → (b, heads, t, dh), contiguous.
fn split_heads(x: &Tensor, heads: usize) -> Result<Tensor> {
    let (b, t, d) = x.dims3()?;
    x.reshape((b, t, heads, d / heads))?
        .transpose(1, 2)?
        .contiguous()
}

/// (b, t, d) → keys laid out for q·kᵀ: (b, heads, dh, t), contiguous.
fn split_heads_transposed(x: &Tensor, heads: usize) -> Result<Tensor> {
    let (b, t, d) = x.dims3()?;
    x.reshape((b, t, heads, d / heads))?
        .permute((0, 2, 3, 1))?
        .contiguous()
}

/// Keys and values already split into heads, so that decoding steps reuse them as they are.
#[derive(Clone)]
struct HeadKv {
    /// (b, heads, dh, tk)
    keys_t: Tensor,
    /// (b, heads, tk, dh)
    values: Tensor,
}

impl HeadKv {
    fn new(k: &Tensor, v: &Tensor, heads: usize) -> Result<Self> {
        Ok(HeadKv {
            keys_t: split_heads_transposed(k, heads)?,
            values: split_heads(v, heads)?,
        })
    }

    fn append(&self, more: &HeadKv) -> Result<Self> {
        Ok(HeadKv {
            keys_t: Tensor::cat(&[&self.keys_t, &more.keys_t], 3)?,
            values: Tensor::cat(&[&self.values, &more.values], 2)?,
        })
    }
}

/// Attention of `q` (b, tq, d) over prepared keys/values, with an optional additive mask.
fn attention(q: &Tensor, kv: &HeadKv, heads: usize, mask: Option<&Tensor>) -> Result<Tensor> {
    let (b, tq, d) = q.dims3()?;
    let dh = d / heads;
    let q = (split_heads(q, heads)? * (dh as f64).powf(-0.5))?;
    let mut scores = q.matmul(&kv.keys_t)?;
    if let Some(mask) = mask {
        scores = scores.broadcast_add(mask)?;
    }
    let weights = candle_nn::ops::softmax_last_dim(&scores)?;
    weights
        .matmul(&kv.values)?
        .transpose(1, 2)?
        .reshape((b, tq, d))
}

struct Mlp {
    up: Linear,
    down: Linear,
    norm: LayerNorm,
}

impl Mlp {
    fn load(m: &Ct2Model, prefix: &str) -> Result<Self> {
        Ok(Mlp {
            up: linear(m, &format!("{prefix}/ffn/linear_0"))?,
            down: linear(m, &format!("{prefix}/ffn/linear_1"))?,
            norm: layer_norm(m, &format!("{prefix}/ffn/layer_norm"))?,
        })
    }

    fn residual(&self, x: &Tensor) -> Result<Tensor> {
        let h = (self.norm.forward(x))?;
        let h = (self
            .up
            .forward(&h)
            .and_then(|h| h.gelu_erf())
            .and_then(|h| self.down.forward(&h)))?;
        x + h
    }
}

struct SelfAttention {
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    norm: LayerNorm,
}

impl SelfAttention {
    fn load(m: &Ct2Model, prefix: &str) -> Result<Self> {
        let mut qkv = split_linear(m, &format!("{prefix}/self_attention/linear_0"), 3)?;
        let v = qkv.pop().expect("3 parts");
        let k = qkv.pop().expect("3 parts");
        let q = qkv.pop().expect("3 parts");
        Ok(SelfAttention {
            q,
            k,
            v,
            out: linear(m, &format!("{prefix}/self_attention/linear_1"))?,
            norm: layer_norm(m, &format!("{prefix}/self_attention/layer_norm"))?,
        })
    }
}

struct EncoderBlock {
    attn: SelfAttention,
    mlp: Mlp,
}

/// The audio encoder.
pub struct Encoder {
    conv1: Conv1d,
    conv2: Conv1d,
    positions: Tensor,
    blocks: Vec<EncoderBlock>,
    norm: LayerNorm,
    heads: usize,
}

impl Encoder {
    /// `mel`: (1, n_mels, 3000) → (1, 1500, n_state).
    pub fn forward(&self, mel: &Tensor) -> Result<Tensor> {
        let x = (self.conv1.forward(mel).and_then(|x| x.gelu_erf()))?;
        let x = (self.conv2.forward(&x).and_then(|x| x.gelu_erf()))?;
        let x = (x.transpose(1, 2))?;
        let t = (x.dim(1))?;
        let mut x = (x.broadcast_add(&(self.positions.narrow(0, 0, t))?))?;
        for block in &self.blocks {
            let a = &block.attn;
            let h = (a.norm.forward(&x))?;
            let (q, k, v) = ((a.q.forward(&h))?, (a.k.forward(&h))?, (a.v.forward(&h))?);
            let att = attention(&q, &HeadKv::new(&k, &v, self.heads)?, self.heads, None)?;
            x = (&x + (a.out.forward(&att))?)?;
            x = block.mlp.residual(&x)?;
        }
        self.norm.forward(&x)
    }
}

struct DecoderBlock {
    attn: SelfAttention,
    cross_q: Linear,
    cross_kv: Vec<Linear>,
    cross_out: Linear,
    cross_norm: LayerNorm,
    mlp: Mlp,
}

/// The text decoder.
pub struct Decoder {
    embeddings: Tensor,
    positions: Tensor,
    blocks: Vec<DecoderBlock>,
    norm: LayerNorm,
    heads: usize,
}

/// Per-window decoding state: cross-attention keys/values and the self-attention cache.
pub struct DecoderState {
    cross: Vec<HeadKv>,
    cache: Vec<Option<HeadKv>>,
    offset: usize,
}

impl Decoder {
    /// Prepares decoding over one window's encoder output.
    pub fn start(&self, audio: &Tensor) -> Result<DecoderState> {
        let cross = self
            .blocks
            .iter()
            .map(|b| {
                HeadKv::new(
                    &b.cross_kv[0].forward(audio)?,
                    &b.cross_kv[1].forward(audio)?,
                    self.heads,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(DecoderState {
            cross,
            cache: vec![None; self.blocks.len()],
            offset: 0,
        })
    }

    /// Feeds `tokens` (new ones only) and returns the logits of the last position.
    pub fn step(&self, state: &mut DecoderState, tokens: &[u32]) -> Result<Tensor> {
        let t = tokens.len();
        let ids = (Tensor::new(tokens, &Device::Cpu).and_then(|ids| ids.unsqueeze(0)))?;
        let tok = (self
            .embeddings
            .index_select(&(ids.squeeze(0))?, 0)
            .and_then(|e| e.unsqueeze(0)))?;
        let pos = (self.positions.narrow(0, state.offset, t))?;
        let mut x = (tok.broadcast_add(&pos))?;
        let mask = if t > 1 {
            // Causal within the new tokens; everything cached is visible.
            let total = state.offset + t;
            let mut m = vec![0f32; t * total];
            for i in 0..t {
                for j in (state.offset + i + 1)..total {
                    m[i * total + j] = f32::NEG_INFINITY;
                }
            }
            Some((Tensor::from_vec(m, (t, total), &Device::Cpu))?)
        } else {
            None
        };
        for (i, block) in self.blocks.iter().enumerate() {
            let a = &block.attn;
            let h = (a.norm.forward(&x))?;
            let (q, k, v) = ((a.q.forward(&h))?, (a.k.forward(&h))?, (a.v.forward(&h))?);
            let new = HeadKv::new(&k, &v, self.heads)?;
            let kv = match &state.cache[i] {
                Some(cached) => cached.append(&new)?,
                None => new,
            };
            let att = attention(&q, &kv, self.heads, mask.as_ref())?;
            state.cache[i] = Some(kv);
            x = (&x + (a.out.forward(&att))?)?;
            let h = (block.cross_norm.forward(&x))?;
            let q = (block.cross_q.forward(&h))?;
            let att = attention(&q, &state.cross[i], self.heads, None)?;
            x = (&x + (block.cross_out.forward(&att))?)?;
            x = block.mlp.residual(&x)?;
        }
        state.offset += t;
        let last = (x.i((.., t - 1, ..)))?;
        let last = self.norm.forward(&last)?;
        // (vocab, d) x (d, 1): multiplying by the transposed embeddings instead would copy
        // the whole vocabulary matrix on every step.
        self.embeddings.matmul(&last.t()?)?.squeeze(1)
    }
}

/// The whole model.
pub struct Whisper {
    pub dims: Dims,
    pub encoder: Encoder,
    pub decoder: Decoder,
}

impl Whisper {
    pub fn from_ct2(m: &Ct2Model) -> Result<Whisper> {
        let conv1_w = var(m, "encoder/conv1/weight")?;
        let (n_state, n_mels, _) = (conv1_w.dims3())?;
        let heads = m
            .scalars
            .get("encoder/num_heads")
            .map(|&h| h as usize)
            .unwrap_or(n_state / 64);
        let text_heads = m
            .scalars
            .get("decoder/num_heads")
            .map(|&h| h as usize)
            .unwrap_or(heads);
        let conv = |prefix: &str, stride: usize| -> Result<Conv1d> {
            Ok(Conv1d::new(
                var(m, &format!("{prefix}/weight"))?,
                Some(var(m, &format!("{prefix}/bias"))?),
                Conv1dConfig {
                    padding: 1,
                    stride,
                    ..Default::default()
                },
            ))
        };
        let enc_layers = count_layers(m, "encoder");
        let dec_layers = count_layers(m, "decoder");
        let encoder = Encoder {
            conv1: conv("encoder/conv1", 1)?,
            conv2: conv("encoder/conv2", 2)?,
            positions: var(m, "encoder/position_encodings/encodings")?,
            blocks: (0..enc_layers)
                .map(|i| {
                    let p = format!("encoder/layer_{i}");
                    Ok(EncoderBlock {
                        attn: SelfAttention::load(m, &p)?,
                        mlp: Mlp::load(m, &p)?,
                    })
                })
                .collect::<Result<_>>()?,
            norm: layer_norm(m, "encoder/layer_norm")?,
            heads,
        };
        let embeddings = var(m, "decoder/embeddings/weight")?;
        let positions = var(m, "decoder/position_encodings/encodings")?;
        let dims = Dims {
            n_mels,
            n_state,
            n_heads: heads,
            n_audio_layers: enc_layers,
            n_text_layers: dec_layers,
            n_vocab: (embeddings.dim(0))?,
            n_text_ctx: (positions.dim(0))?,
            n_audio_ctx: (encoder.positions.dim(0))?,
        };
        let decoder = Decoder {
            embeddings,
            positions,
            blocks: (0..dec_layers)
                .map(|i| {
                    let p = format!("decoder/layer_{i}");
                    Ok(DecoderBlock {
                        attn: SelfAttention::load(m, &p)?,
                        cross_q: linear(m, &format!("{p}/attention/linear_0"))?,
                        cross_kv: split_linear(m, &format!("{p}/attention/linear_1"), 2)?,
                        cross_out: linear(m, &format!("{p}/attention/linear_2"))?,
                        cross_norm: layer_norm(m, &format!("{p}/attention/layer_norm"))?,
                        mlp: Mlp::load(m, &p)?,
                    })
                })
                .collect::<Result<_>>()?,
            norm: layer_norm(m, "decoder/layer_norm")?,
            heads: text_heads,
        };
        if enc_layers == 0 || dec_layers == 0 {
            candle_core::bail!("the model has no encoder or decoder layers");
        }
        Ok(Whisper {
            dims,
            encoder,
            decoder,
        })
    }

    /// Runs the encoder over one window of log-mel frames (n_mels × 3000, row-major).
    pub fn encode(&self, mel: &[f32], frames: usize) -> Result<Tensor> {
        let mel = (Tensor::from_slice(mel, (1, self.dims.n_mels, frames), &Device::Cpu))?;
        self.encoder.forward(&mel)
    }

    pub fn logits_to_vec(logits: &Tensor) -> Result<Vec<f32>> {
        logits.to_dtype(DType::F32).and_then(|l| l.to_vec1::<f32>())
    }
}
