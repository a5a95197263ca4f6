//! The Whisper network on candle, built straight from CTranslate2 variable names.
//!
//! Encoder (candle: its work is a few large matrix products per window): two convolutions
//! (GELU), learned positions, pre-norm transformer blocks, final norm. Its projections run in
//! int8 (see [`gemm`]) where the CPU has AVX-512 VNNI and the model is loaded at int8. Decoder:
//! the hand-written [`TextDecoder`], whose cross-attention keys and values are computed here
//! once per window.

use super::ct2::Ct2Model;
use super::gemm::{self, QuantizedLinear};
use super::kernels::{self, Matrix, Precision};
use super::text_decoder::{Block, CrossKv, Norm, TextDecoder};
use candle_core::{DType, Device, Module, Storage, Tensor};
use candle_nn::{Conv1d, Conv1dConfig, LayerNorm, Linear};
use headroom_base::sync::Locked;

pub type Result<T> = candle_core::Result<T>;

/// A tensor's elements as float32, in row-major order.
fn values(t: &Tensor) -> Result<Vec<f32>> {
    t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()
}

/// A tensor the model must have, taken from the file's variables (each is used once).
fn var(m: &mut Ct2Model, name: &str) -> Result<Tensor> {
    m.take(name).map_err(candle_core::Error::Msg)
}

/// A tensor the model may have.
fn optional(m: &mut Ct2Model, name: &str) -> Result<Option<Tensor>> {
    if m.has(name) {
        var(m, name).map(Some)
    } else {
        Ok(None)
    }
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

/// A projection applied to a whole window's frames at once.
enum StoredLinear {
    /// Weights kept as the file stores them (float16 for the models Headroom installs: half
    /// the bytes) and widened to float32 for each use. Each use is a whole window's frames,
    /// so the widening costs a small part of the product it feeds.
    Float {
        weight: Tensor,
        bias: Option<Tensor>,
    },
    /// Int8 weights, multiplied with AVX-512 VNNI: half the bytes of float16, and several
    /// times the speed of the float32 product.
    Int8(QuantizedLinear),
}

impl StoredLinear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            StoredLinear::Float { weight, bias } => {
                Linear::new(weight.to_dtype(DType::F32)?, bias.clone()).forward(x)
            }
            StoredLinear::Int8(layer) => {
                let mut dims = x.dims().to_vec();
                if dims.last() != Some(&layer.cols()) {
                    candle_core::bail!(
                        "a projection of {} inputs given {:?}",
                        layer.cols(),
                        x.shape()
                    );
                }
                let mut out = vec![0f32; x.elem_count() / layer.cols() * layer.rows()];
                with_f32_elements(x, |input| layer.forward(input, &mut out))?;
                *dims.last_mut().expect("checked above") = layer.rows();
                Tensor::from_vec(out, dims, x.device())
            }
        }
    }
}

/// `f` of a float32 tensor's elements in row-major order, read in place when they are
/// already laid out so (as the encoder's activations are), rather than copied out.
fn with_f32_elements<R>(x: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let x = x.contiguous()?;
    let (storage, layout) = x.storage_and_layout();
    let (Storage::Cpu(cpu), Some((start, end))) = (&*storage, layout.contiguous_offsets()) else {
        candle_core::bail!("expected a contiguous tensor on the CPU");
    };
    Ok(f(&cpu.as_slice::<f32>()?[start..end]))
}

fn linear(m: &mut Ct2Model, prefix: &str, int8: bool) -> Result<StoredLinear> {
    Ok(split_linear(m, prefix, 1, int8)?.pop().expect("one part"))
}

/// Splits a stacked projection (q,k,v or k,v) into `parts` linears along the output dim,
/// quantized when `int8`.
fn split_linear(
    m: &mut Ct2Model,
    prefix: &str,
    parts: usize,
    int8: bool,
) -> Result<Vec<StoredLinear>> {
    let name = format!("{prefix}/weight");
    let bias = optional(m, &format!("{prefix}/bias"))?;
    if int8 {
        let (dims, weights) = values_of(m, &name)?;
        let [rows, cols] = dims[..] else {
            candle_core::bail!("{name} is not a matrix: {dims:?}");
        };
        let bias = bias.as_ref().map(values).transpose()?;
        let rows = rows / parts;
        return Ok((0..parts)
            .map(|i| {
                let span = i * rows..(i + 1) * rows;
                StoredLinear::Int8(QuantizedLinear::new(
                    rows,
                    cols,
                    &weights[span.start * cols..span.end * cols],
                    bias.as_ref().map(|b| &b[span]),
                ))
            })
            .collect());
    }
    let weight = m.take_stored(&name).map_err(candle_core::Error::Msg)?;
    let rows = weight.dim(0)? / parts;
    (0..parts)
        .map(|i| {
            // Copies of their own, so that the stacked tensor they are cut from is freed.
            Ok(StoredLinear::Float {
                weight: weight.narrow(0, i * rows, rows)?.copy()?,
                bias: bias
                    .as_ref()
                    .map(|b| b.narrow(0, i * rows, rows)?.copy())
                    .transpose()?,
            })
        })
        .collect()
}

fn layer_norm(m: &mut Ct2Model, prefix: &str) -> Result<LayerNorm> {
    Ok(LayerNorm::new(
        var(m, &format!("{prefix}/gamma"))?,
        var(m, &format!("{prefix}/beta"))?,
        1e-5,
    ))
}

fn count_layers(m: &Ct2Model, stack: &str) -> usize {
    (0..)
        .take_while(|i| m.has(&format!("{stack}/layer_{i}/ffn/linear_0/weight")))
        .count()
}

/// (b, t, d) → (b, heads, t, dh), contiguous.
fn split_heads(x: &Tensor, heads: usize) -> Result<Tensor> {
    let (b, t, d) = x.dims3()?;
    x.reshape((b, t, heads, d / heads))?
        .transpose(1, 2)?
        .contiguous()
}

/// `f` applied to a tensor's elements (as one contiguous float32 buffer), same shape.
fn map_elements(x: &Tensor, f: impl FnOnce(&mut [f32])) -> Result<Tensor> {
    let shape = x.shape().clone();
    let mut values = x.flatten_all()?.to_vec1::<f32>()?;
    f(&mut values);
    Tensor::from_vec(values, shape, x.device())
}

/// GELU (erf), on every core.
fn gelu(x: &Tensor) -> Result<Tensor> {
    map_elements(x, kernels::gelu_parallel)
}

/// Self-attention of (b, t, d) queries, keys and values, one head at a time: a head's
/// t × t scores are the largest buffer it makes (9 MB for a window), not all heads' at once.
fn attention(q: &Tensor, k: &Tensor, v: &Tensor, heads: usize) -> Result<Tensor> {
    let (b, t, d) = q.dims3()?;
    let dh = d / heads;
    let q = (split_heads(q, heads)? * (dh as f64).powf(-0.5))?;
    let keys_t = k
        .reshape((b, t, heads, dh))?
        .permute((0, 2, 3, 1))?
        .contiguous()?;
    let values = split_heads(v, heads)?;
    let mut outputs = Vec::with_capacity(heads);
    for h in 0..heads {
        let scores = q.narrow(1, h, 1)?.matmul(&keys_t.narrow(1, h, 1)?)?;
        let weights = map_elements(&scores, |s| kernels::softmax_rows_parallel(s, t))?;
        drop(scores);
        outputs.push(weights.matmul(&values.narrow(1, h, 1)?)?);
    }
    Tensor::cat(&outputs, 1)?
        .transpose(1, 2)?
        .reshape((b, t, d))
}

struct Mlp {
    up: StoredLinear,
    down: StoredLinear,
    norm: LayerNorm,
}

impl Mlp {
    fn load(m: &mut Ct2Model, prefix: &str, int8: bool) -> Result<Self> {
        Ok(Mlp {
            up: linear(m, &format!("{prefix}/ffn/linear_0"), int8)?,
            down: linear(m, &format!("{prefix}/ffn/linear_1"), int8)?,
            norm: layer_norm(m, &format!("{prefix}/ffn/layer_norm"))?,
        })
    }

    fn residual(&self, x: &Tensor) -> Result<Tensor> {
        let h = (self.norm.forward(x))?;
        let h = self.down.forward(&gelu(&self.up.forward(&h)?)?)?;
        x + h
    }
}

struct SelfAttention {
    q: StoredLinear,
    k: StoredLinear,
    v: StoredLinear,
    out: StoredLinear,
    norm: LayerNorm,
}

impl SelfAttention {
    fn load(m: &mut Ct2Model, prefix: &str, int8: bool) -> Result<Self> {
        let mut qkv = split_linear(m, &format!("{prefix}/self_attention/linear_0"), 3, int8)?;
        let v = qkv.pop().expect("3 parts");
        let k = qkv.pop().expect("3 parts");
        let q = qkv.pop().expect("3 parts");
        Ok(SelfAttention {
            q,
            k,
            v,
            out: linear(m, &format!("{prefix}/self_attention/linear_1"), int8)?,
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
        let x = gelu(&self.conv1.forward(mel)?)?;
        let x = gelu(&self.conv2.forward(&x)?)?;
        let x = (x.transpose(1, 2))?;
        let t = (x.dim(1))?;
        let mut x = (x.broadcast_add(&(self.positions.narrow(0, 0, t))?))?;
        for block in &self.blocks {
            let a = &block.attn;
            let h = (a.norm.forward(&x))?;
            let (q, k, v) = ((a.q.forward(&h))?, (a.k.forward(&h))?, (a.v.forward(&h))?);
            let att = attention(&q, &k, &v, self.heads)?;
            x = (&x + (a.out.forward(&att))?)?;
            x = block.mlp.residual(&x)?;
        }
        self.norm.forward(&x)
    }
}

fn conv(weight: Tensor, m: &mut Ct2Model, prefix: &str, stride: usize) -> Result<Conv1d> {
    Ok(Conv1d::new(
        weight,
        Some(var(m, &format!("{prefix}/bias"))?),
        Conv1dConfig {
            padding: 1,
            stride,
            ..Default::default()
        },
    ))
}

/// A variable's shape and float32 elements, taken from the file's variables.
fn values_of(m: &mut Ct2Model, name: &str) -> Result<(Vec<usize>, Vec<f32>)> {
    m.take_values(name).map_err(candle_core::Error::Msg)
}

/// A decoder matrix (and its bias, if any) at `precision`.
fn matrix(m: &mut Ct2Model, prefix: &str, precision: Precision) -> Result<Matrix> {
    let (dims, weights) = values_of(m, &format!("{prefix}/weight"))?;
    let [rows, cols] = dims[..] else {
        candle_core::bail!("{prefix}/weight is not a matrix: {dims:?}");
    };
    let bias_name = format!("{prefix}/bias");
    let bias = if m.has(&bias_name) {
        let (_, b) = values_of(m, &bias_name)?;
        if b.len() != rows {
            candle_core::bail!("{bias_name} has {} values for {rows} rows", b.len());
        }
        Some(b)
    } else {
        None
    };
    Ok(Matrix::new(rows, cols, weights, bias, precision))
}

fn norm(m: &mut Ct2Model, prefix: &str) -> Result<Norm> {
    Ok(Norm {
        gamma: values_of(m, &format!("{prefix}/gamma"))?.1,
        beta: values_of(m, &format!("{prefix}/beta"))?.1,
    })
}

/// The whole model.
pub struct Whisper {
    pub dims: Dims,
    pub encoder: Encoder,
    pub decoder: TextDecoder,
    /// Per decoder block, the projections of the audio to cross-attention keys and values:
    /// applied once per window, to all its frames at once.
    cross_kv: Vec<(StoredLinear, StoredLinear)>,
    /// One window encoded at a time by interactive work, and one by batch work.
    encoding: [std::sync::Mutex<()>; 2],
}

impl Whisper {
    /// The model from CTranslate2 variables, with the decoder's matrices at `precision`. At
    /// int8 the projections of whole windows (the encoder's, and the audio's to the decoder's
    /// cross-attention) are int8 too where the CPU has AVX-512 VNNI; elsewhere they stay float.
    pub fn from_ct2(m: &mut Ct2Model, precision: Precision) -> Result<Whisper> {
        let int8 = precision == Precision::Int8 && gemm::int8_supported();
        tracing::debug!(int8, "whisper encoder projections");
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
        let enc_layers = count_layers(m, "encoder");
        let dec_layers = count_layers(m, "decoder");
        let encoder = Encoder {
            conv1: conv(conv1_w, m, "encoder/conv1", 1)?,
            conv2: {
                let w = var(m, "encoder/conv2/weight")?;
                conv(w, m, "encoder/conv2", 2)?
            },
            positions: var(m, "encoder/position_encodings/encodings")?,
            blocks: (0..enc_layers)
                .map(|i| {
                    let p = format!("encoder/layer_{i}");
                    Ok(EncoderBlock {
                        attn: SelfAttention::load(m, &p, int8)?,
                        mlp: Mlp::load(m, &p, int8)?,
                    })
                })
                .collect::<Result<_>>()?,
            norm: layer_norm(m, "encoder/layer_norm")?,
            heads,
        };
        let (embedding_dims, embeddings) = values_of(m, "decoder/embeddings/weight")?;
        let (position_dims, positions) = values_of(m, "decoder/position_encodings/encodings")?;
        let dims = Dims {
            n_mels,
            n_state,
            n_heads: heads,
            n_audio_layers: enc_layers,
            n_text_layers: dec_layers,
            n_vocab: embedding_dims[0],
            n_text_ctx: position_dims[0],
            n_audio_ctx: (encoder.positions.dim(0))?,
        };
        if embedding_dims != [dims.n_vocab, n_state] || position_dims.get(1) != Some(&n_state) {
            candle_core::bail!("the decoder's embeddings do not match its width {n_state}");
        }
        let matrix = |m: &mut Ct2Model, prefix: &str| matrix(m, prefix, precision);
        let mut blocks = Vec::with_capacity(dec_layers);
        let mut cross_kv = Vec::with_capacity(dec_layers);
        for i in 0..dec_layers {
            let p = format!("decoder/layer_{i}");
            blocks.push(Block {
                self_norm: norm(m, &format!("{p}/self_attention/layer_norm"))?,
                qkv: matrix(m, &format!("{p}/self_attention/linear_0"))?,
                self_out: matrix(m, &format!("{p}/self_attention/linear_1"))?,
                cross_norm: norm(m, &format!("{p}/attention/layer_norm"))?,
                cross_q: matrix(m, &format!("{p}/attention/linear_0"))?,
                cross_out: matrix(m, &format!("{p}/attention/linear_2"))?,
                mlp_norm: norm(m, &format!("{p}/ffn/layer_norm"))?,
                up: matrix(m, &format!("{p}/ffn/linear_0"))?,
                down: matrix(m, &format!("{p}/ffn/linear_1"))?,
            });
            let mut kv = split_linear(m, &format!("{p}/attention/linear_1"), 2, int8)?;
            let v = kv.pop().expect("2 parts");
            let k = kv.pop().expect("2 parts");
            cross_kv.push((k, v));
        }
        let decoder = TextDecoder {
            d: n_state,
            heads: text_heads,
            embeddings: Matrix::new(dims.n_vocab, n_state, embeddings, None, precision),
            positions,
            blocks,
            norm: norm(m, "decoder/layer_norm")?,
        };
        if enc_layers == 0 || dec_layers == 0 {
            candle_core::bail!("the model has no encoder or decoder layers");
        }
        Ok(Whisper {
            dims,
            encoder,
            decoder,
            cross_kv,
            encoding: [std::sync::Mutex::new(()), std::sync::Mutex::new(())],
        })
    }

    /// One window of log-mel frames (n_mels × `frames`, row-major) through the encoder, as
    /// the decoder's cross-attention reads it. One window is encoded at a time (by each of
    /// interactive and batch work): the encoder's products already use every core, and a
    /// second one at once would only hold its activations in memory beside the first
    /// (windows decoded meanwhile go on). Interactive work never waits for a batch encode.
    ///
    /// The lock is taken here, on the caller's thread, and batch work's products run on the
    /// idle-priority pool inside it: taken on a pool thread, a second encode stolen by that
    /// thread while it waits for its own products would wait for the lock it holds.
    pub fn encode(&self, mel: &[f32], frames: usize) -> Result<CrossKv> {
        let lock = &self.encoding[usize::from(headroom_base::cpu::in_batch())];
        let _one_at_a_time = lock.locked();
        headroom_base::cpu::compute(|| {
            let mel = Tensor::from_slice(mel, (1, self.dims.n_mels, frames), &Device::Cpu)?;
            let audio = self.encoder.forward(&mel)?;
            self.cross_kv(&audio)
        })
    }

    /// Encoder output as the decoder's cross-attention reads it, a block at a time (so only
    /// one block's rows are ever held twice).
    fn cross_kv(&self, audio: &Tensor) -> Result<CrossKv> {
        let frames = audio.dim(1)?;
        let heads = self.decoder.heads;
        let mut cross = CrossKv::new(frames);
        for (k, v) in &self.cross_kv {
            cross.push_block(
                &values(&k.forward(audio)?)?,
                &values(&v.forward(audio)?)?,
                heads,
            );
        }
        Ok(cross)
    }
}
