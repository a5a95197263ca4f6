//! Reads CTranslate2 `model.bin` files (the format faster-whisper ships) into candle tensors.
//!
//! Layout (version 6): u32 version; u16-length-prefixed spec name; u32 spec revision; u32
//! variable count; per variable: name, u8 rank, u32 dims, u8 dtype, u32 byte count, data;
//! then u32 alias count and (alias, target) name pairs.

use candle_core::{DType, Device, Tensor};
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
use rayon::prelude::*;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// A problem with a model file, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum Ct2Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a CTranslate2 model file: {reason}")]
    Format { path: String, reason: String },
    #[error("{path}: {reason}")]
    Unsupported { path: String, reason: String },
    #[error("{path}: variable {name}: {message}")]
    Tensor {
        path: String,
        name: String,
        message: String,
    },
}

/// The variables of a model: tensors (as f32) and integer scalars.
/// The variables of a CTranslate2 model file, held as the file stores them (often float16)
/// until the model takes each one: loading never holds the whole file and a float32 copy of
/// it at once.
pub struct Ct2Model {
    vars: HashMap<String, Var>,
    /// Alias → the variable it names.
    aliases: HashMap<String, String>,
    pub scalars: HashMap<String, i64>,
}

struct Var {
    dtype: DType,
    dims: Vec<usize>,
    raw: Vec<u8>,
}

impl Var {
    /// The elements as float32, straight from the file's bytes, converted in pieces on every
    /// core (float16 with the CPU's conversion instructions where it has them).
    fn values(&self) -> Vec<f32> {
        const PIECE: usize = 1 << 16;
        let size = self.dtype.size_in_bytes();
        let mut out = vec![0f32; self.raw.len() / size];
        out.par_chunks_mut(PIECE)
            .zip(self.raw.par_chunks(PIECE * size))
            .for_each(|(out, raw)| match self.dtype {
                DType::F16 => widen(raw, out, |bits, out| {
                    bits.reinterpret_cast::<half::f16>()
                        .convert_to_f32_slice(out)
                }),
                DType::BF16 => widen(raw, out, |bits, out| {
                    bits.reinterpret_cast::<half::bf16>()
                        .convert_to_f32_slice(out)
                }),
                _ => {
                    for (o, b) in out.iter_mut().zip(raw.chunks_exact(4)) {
                        *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    }
                }
            });
        out
    }

    fn to_f32(&self) -> Result<Tensor, String> {
        Tensor::from_raw_buffer(&self.raw, self.dtype, &self.dims, &Device::Cpu)
            .and_then(|t| t.to_dtype(DType::F32))
            .map_err(|e| e.to_string())
    }
}

/// Little-endian 16-bit floats (`raw`) widened into `out`, a stack buffer at a time: the
/// bytes need not be aligned as `u16`s are.
fn widen(raw: &[u8], out: &mut [f32], convert: impl Fn(&[u16], &mut [f32])) {
    let mut bits = [0u16; 512];
    for (raw, out) in raw.chunks(bits.len() * 2).zip(out.chunks_mut(bits.len())) {
        let bits = &mut bits[..out.len()];
        for (b, pair) in bits.iter_mut().zip(raw.chunks_exact(2)) {
            *b = u16::from_le_bytes([pair[0], pair[1]]);
        }
        convert(bits, out);
    }
}

/// Reads the file's fields in order, never past its known length.
struct Reader<R> {
    source: R,
    pos: u64,
    len: u64,
}

impl<R: Read> Reader<R> {
    fn take(&mut self, n: usize) -> Result<Vec<u8>, String> {
        // Checked before allocating: a crafted size must not cost memory.
        if n as u64 > self.len - self.pos {
            return Err(format!("truncated at byte {} (wanted {n} more)", self.pos));
        }
        let mut bytes = vec![0; n];
        self.source
            .read_exact(&mut bytes)
            .map_err(|e| format!("unreadable at byte {}: {e}", self.pos))?;
        self.pos += n as u64;
        Ok(bytes)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn string(&mut self) -> Result<String, String> {
        let len = self.u16()? as usize;
        let bytes = self.take(len)?;
        let text = std::str::from_utf8(&bytes).map_err(|e| format!("a name is not UTF-8: {e}"))?;
        Ok(text.trim_end_matches('\0').to_string())
    }
}

impl Ct2Model {
    /// Reads a model file variable by variable.
    pub fn load(path: &Path) -> Result<Ct2Model, Ct2Error> {
        let shown = path.display().to_string();
        let read_error = |source| Ct2Error::Read {
            path: shown.clone(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let len = file.metadata().map_err(read_error)?.len();
        Self::read(std::io::BufReader::new(file), len, &shown)
    }

    pub fn parse(data: &[u8], shown: &str) -> Result<Ct2Model, Ct2Error> {
        Self::read(data, data.len() as u64, shown)
    }

    fn read(source: impl Read, len: u64, shown: &str) -> Result<Ct2Model, Ct2Error> {
        let format = |reason: String| Ct2Error::Format {
            path: shown.to_string(),
            reason,
        };
        let mut r = Reader {
            source,
            pos: 0,
            len,
        };
        let version = r.u32().map_err(format)?;
        if !(5..=6).contains(&version) {
            return Err(format(format!("unknown format version {version}")));
        }
        let _spec = r.string().map_err(format)?;
        let _revision = r.u32().map_err(format)?;
        let count = r.u32().map_err(format)?;
        let mut vars = HashMap::new();
        let mut scalars = HashMap::new();
        for _ in 0..count {
            let name = r.string().map_err(format)?;
            let rank = r.u8().map_err(format)? as usize;
            let mut dims = Vec::with_capacity(rank);
            for _ in 0..rank {
                dims.push(r.u32().map_err(format)? as usize);
            }
            let dtype = r.u8().map_err(format)?;
            let bytes = r.u32().map_err(format)? as usize;
            let raw = r.take(bytes).map_err(format)?;
            if rank == 0 {
                let value = match (dtype, raw.len()) {
                    (1, 1) => raw[0] as i8 as i64,
                    (2, 2) => i16::from_le_bytes([raw[0], raw[1]]) as i64,
                    (3, 4) => i32::from_le_bytes(raw[..].try_into().expect("4 bytes")) as i64,
                    _ => continue, // float scalars (e.g. scales) are not used by Whisper
                };
                scalars.insert(name, value);
                continue;
            }
            let candle_dtype = match dtype {
                0 => DType::F32,
                4 => DType::F16,
                5 => DType::BF16,
                1..=3 => {
                    return Err(Ct2Error::Unsupported {
                        path: shown.to_string(),
                        reason: format!(
                            "{name} is integer-quantized; only float16/bfloat16/float32 models are supported"
                        ),
                    })
                }
                other => return Err(format(format!("{name} has unknown dtype {other}"))),
            };
            // candle trusts these to agree: it multiplies the dims unchecked (for the strides
            // too, so an empty dim does not make the others safe), and copies the whole buffer
            // into one sized from the element count when the data is unaligned.
            let size = candle_dtype.size_in_bytes();
            let strides_fit = dims
                .iter()
                .try_fold(size, |n, &d| n.checked_mul(d.max(1)))
                .is_some();
            let expected = dims.iter().try_fold(size, |n, &d| n.checked_mul(d));
            if !strides_fit || expected != Some(raw.len()) {
                return Err(Ct2Error::Tensor {
                    path: shown.to_string(),
                    name,
                    message: format!(
                        "shape {dims:?} of {candle_dtype:?} does not match its {} bytes",
                        raw.len()
                    ),
                });
            }
            vars.insert(
                name,
                Var {
                    dtype: candle_dtype,
                    dims,
                    raw,
                },
            );
        }
        let mut aliases = HashMap::new();
        if let Ok(count) = r.u32() {
            for _ in 0..count {
                let alias = r.string().map_err(format)?;
                let target = r.string().map_err(format)?;
                aliases.insert(alias, target);
            }
        }
        Ok(Ct2Model {
            vars,
            aliases,
            scalars,
        })
    }

    fn resolve<'a>(&'a self, name: &'a str) -> &'a str {
        self.aliases.get(name).map_or(name, String::as_str)
    }

    /// The variables' names and shapes (aliases not included).
    pub fn shapes(&self) -> impl Iterator<Item = (&str, &[usize])> {
        self.vars
            .iter()
            .map(|(n, v)| (n.as_str(), v.dims.as_slice()))
    }

    /// Whether the model has a variable (or alias) of this name.
    pub fn has(&self, name: &str) -> bool {
        self.vars.contains_key(self.resolve(name))
    }

    /// A variable as float32, or an error naming what is missing.
    pub fn tensor(&self, name: &str) -> Result<Tensor, String> {
        self.vars
            .get(self.resolve(name))
            .ok_or_else(|| format!("the model has no variable {name}"))?
            .to_f32()
            .map_err(|e| format!("variable {name}: {e}"))
    }

    /// As [`Ct2Model::tensor`], giving the variable's memory back: each is taken once.
    pub fn take(&mut self, name: &str) -> Result<Tensor, String> {
        self.take_var(name)?
            .to_f32()
            .map_err(|e| format!("variable {name}: {e}"))
    }

    /// As [`Ct2Model::take`], in the type the file stores it in.
    pub fn take_stored(&mut self, name: &str) -> Result<Tensor, String> {
        let var = self.take_var(name)?;
        Tensor::from_raw_buffer(&var.raw, var.dtype, &var.dims, &Device::Cpu)
            .map_err(|e| format!("variable {name}: {e}"))
    }

    /// A variable's shape and float32 elements, taken as [`Ct2Model::take`] does.
    pub fn take_values(&mut self, name: &str) -> Result<(Vec<usize>, Vec<f32>), String> {
        let var = self.take_var(name)?;
        Ok((var.dims.clone(), var.values()))
    }

    fn take_var(&mut self, name: &str) -> Result<Var, String> {
        let key = self.resolve(name).to_string();
        self.vars
            .remove(&key)
            .ok_or_else(|| format!("the model has no variable {name}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_str(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u16 + 1).to_le_bytes());
        out.extend(s.as_bytes());
        out.push(0);
    }

    fn tiny_file() -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(6u32.to_le_bytes());
        put_str(&mut out, "WhisperSpec");
        out.extend(3u32.to_le_bytes());
        out.extend(2u32.to_le_bytes());
        // a 2x2 f32 matrix
        put_str(&mut out, "a/weight");
        out.push(2);
        out.extend(2u32.to_le_bytes());
        out.extend(2u32.to_le_bytes());
        out.push(0);
        out.extend(16u32.to_le_bytes());
        for v in [1.0f32, 2.0, 3.0, 4.0] {
            out.extend(v.to_le_bytes());
        }
        // an int16 scalar
        put_str(&mut out, "num_heads");
        out.push(0);
        out.push(2);
        out.extend(2u32.to_le_bytes());
        out.extend(6i16.to_le_bytes());
        out.extend(1u32.to_le_bytes());
        put_str(&mut out, "b/weight");
        put_str(&mut out, "a/weight");
        out
    }

    #[test]
    fn parses_tensors_scalars_and_aliases() {
        let m = Ct2Model::parse(&tiny_file(), "test.bin").unwrap();
        assert_eq!(m.scalars["num_heads"], 6);
        let a = m.tensor("a/weight").unwrap();
        assert_eq!(a.dims(), &[2, 2]);
        assert_eq!(
            a.to_vec2::<f32>().unwrap(),
            vec![vec![1.0, 2.0], vec![3.0, 4.0]]
        );
        assert_eq!(
            m.tensor("b/weight").unwrap().to_vec2::<f32>().unwrap()[1][1],
            4.0
        );
    }

    /// A file with one variable: `dims`, `dtype`, then `raw` as its data.
    fn one_variable(dims: &[u32], dtype: u8, raw: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(6u32.to_le_bytes());
        put_str(&mut out, "WhisperSpec");
        out.extend(3u32.to_le_bytes());
        out.extend(1u32.to_le_bytes());
        put_str(&mut out, "w");
        out.push(dims.len() as u8);
        for d in dims {
            out.extend(d.to_le_bytes());
        }
        out.push(dtype);
        out.extend((raw.len() as u32).to_le_bytes());
        out.extend(raw);
        out
    }

    #[test]
    fn shapes_that_do_not_match_their_data_are_refused() {
        // Found by fuzzing (fuzz/corpus/ct2_model/crash-*): dims whose product (or strides)
        // overflow, and a byte count that is not a whole number of elements (candle then
        // copied it past the end of a buffer sized by the element count).
        let crafted = [
            one_variable(&[1 << 31, 1 << 31, 1 << 31], 0, &[]),
            one_variable(&[0], 0, &[0]),
            one_variable(&[1], 0, &[0; 5]),
            one_variable(&[2, 2], 4, &[0; 6]),
            one_variable(&[3], 5, &[0; 8]),
            one_variable(&[0, u32::MAX, u32::MAX, u32::MAX], 0, &[]),
        ];
        for file in crafted {
            let err = Ct2Model::parse(&file, "crafted.bin")
                .err()
                .expect("an error");
            assert!(matches!(err, Ct2Error::Tensor { .. }), "{err}");
            assert!(
                err.to_string()
                    .starts_with("crafted.bin: variable w: shape"),
                "{err}"
            );
        }
        // The minimised fuzzer find itself.
        let found = b"\x06\0\0\0\0\0\0\x02\0\0\x6c\0\0\0\0\0\x01\0\0\0\0\0\x01\0\0\0\0";
        let err = Ct2Model::parse(found, "found.bin").err().expect("an error");
        assert!(matches!(err, Ct2Error::Tensor { .. }), "{err}");
        let ok = Ct2Model::parse(&one_variable(&[2, 0, 3], 0, &[]), "empty.bin").unwrap();
        assert_eq!(ok.tensor("w").unwrap().dims(), &[2, 0, 3]);
        assert_eq!(ok.shapes().collect::<Vec<_>>(), vec![("w", &[2, 0, 3][..])]);
    }

    #[test]
    fn half_precision_values_widen_exactly_across_pieces() {
        // More elements than one conversion piece and than one stack buffer, an odd count
        // (a short last piece), and every special kind of value.
        let specials = [0.0, -0.0, 1.0, -2.5, 65504.0, 1e-7, f32::INFINITY, f32::NAN];
        let wanted: Vec<f32> = (0..70_001)
            .map(|i| {
                specials
                    .get(i)
                    .copied()
                    .unwrap_or((i as f32 * 0.37).sin() * 300.0)
            })
            .collect();
        for (dtype, encode) in [
            (
                4u8,
                (|v| half::f16::from_f32(v).to_bits()) as fn(f32) -> u16,
            ),
            (5u8, |v| half::bf16::from_f32(v).to_bits()),
        ] {
            let raw: Vec<u8> = wanted
                .iter()
                .flat_map(|&v| encode(v).to_le_bytes())
                .collect();
            let mut m = Ct2Model::parse(&one_variable(&[70_001], dtype, &raw), "h.bin").unwrap();
            let (dims, values) = m.take_values("w").unwrap();
            assert_eq!(dims, [70_001]);
            for (i, (&got, &v)) in values.iter().zip(&wanted).enumerate() {
                let expected = if dtype == 4 {
                    half::f16::from_f32(v).to_f32()
                } else {
                    half::bf16::from_f32(v).to_f32()
                };
                assert!(
                    got.to_bits() == expected.to_bits() || (got.is_nan() && expected.is_nan()),
                    "dtype {dtype}, element {i}: {got} for {expected}"
                );
            }
        }
    }

    #[test]
    fn truncated_files_are_reported_not_panicked() {
        let file = tiny_file();
        for cut in [0, 3, 10, 40, file.len() - 20] {
            let err = Ct2Model::parse(&file[..cut], "cut.bin")
                .err()
                .expect("an error");
            assert!(err.to_string().contains("cut.bin"), "{err}");
        }
    }
}
