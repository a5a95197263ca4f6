//! The speaker embeddings of a recording's windows (one every 0.2 s of speech), kept for the
//! clustering in half precision, one after another: a 256-value embedding takes 512 bytes
//! rather than an allocation of its own of 1 KiB and more, so three hours of speech (about
//! 54,000 windows) hold 27 MB where they held 55 MB — the one part of diarizing that grows
//! with the length. An embedding is a unit vector, its values well inside ±1, where half
//! precision keeps three decimal digits: similarities move by less than 0.001.

use crate::voice::embedder::{Embedding, EMBEDDING_DIM};
use half::f16;
use half::slice::HalfFloatSliceExt;

/// The windows' embeddings, by window index.
#[derive(Debug, Clone, Default)]
pub(super) struct WindowVectors {
    values: Vec<f16>,
}

impl WindowVectors {
    pub(super) fn with_capacity(windows: usize) -> WindowVectors {
        WindowVectors {
            values: Vec::with_capacity(windows * EMBEDDING_DIM),
        }
    }

    pub(super) fn push(&mut self, embedding: &Embedding) {
        self.values
            .extend(embedding.values().iter().map(|v| f16::from_f32(*v)));
    }

    pub(super) fn len(&self) -> usize {
        self.values.len() / EMBEDDING_DIM
    }

    /// Window `i`'s embedding, in single precision.
    fn row(&self, i: usize) -> [f32; EMBEDDING_DIM] {
        let mut row = [0f32; EMBEDDING_DIM];
        self.values[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM].convert_to_f32_slice(&mut row);
        row
    }

    /// Cosine similarity of window `i` to `other`.
    pub(super) fn similarity(&self, i: usize, other: &Embedding) -> f32 {
        self.row(i)
            .iter()
            .zip(other.values())
            .map(|(a, b)| a * b)
            .sum()
    }

    /// The normalised mean of the windows `indices`; `None` for none.
    pub(super) fn mean(&self, indices: impl IntoIterator<Item = usize>) -> Option<Embedding> {
        let mut sum = vec![0f32; EMBEDDING_DIM];
        for i in indices {
            for (s, v) in sum.iter_mut().zip(self.row(i)) {
                *s += v;
            }
        }
        Embedding::new(sum)
    }
}

impl FromIterator<Embedding> for WindowVectors {
    fn from_iter<I: IntoIterator<Item = Embedding>>(embeddings: I) -> WindowVectors {
        let mut vectors = WindowVectors::default();
        for e in embeddings {
            vectors.push(&e);
        }
        vectors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit vector from a seed, spread as an embedder's are (every value small, some
    /// negative).
    fn embedding(seed: u64) -> Embedding {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let values = (0..EMBEDDING_DIM)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        Embedding::new(values).unwrap()
    }

    #[test]
    fn similarities_and_means_in_half_precision_stay_within_a_thousandth() {
        let all: Vec<Embedding> = (0..40).map(embedding).collect();
        let vectors: WindowVectors = all.iter().cloned().collect();
        assert_eq!(vectors.len(), 40);
        for (i, e) in all.iter().enumerate() {
            for other in &all[..5] {
                let exact = e.similarity(other);
                let kept = vectors.similarity(i, other);
                assert!((exact - kept).abs() < 1e-3, "{i}: {exact} against {kept}");
            }
        }
        let exact = Embedding::mean(all[3..17].iter()).unwrap();
        let kept = vectors.mean(3..17).unwrap();
        assert!(exact.similarity(&kept) > 0.9999);
        assert!(vectors.mean(std::iter::empty()).is_none());
    }
}
