//! The speaker embeddings of a recording's windows (one every 0.2 s of speech), kept for the
//! clustering in half precision, one after another: a 256-value embedding takes 512 bytes.
//! Three hours of speech are about 54,000 windows, 27 MB: the one part of diarizing that grows
//! with the length, so for a transcription they are spooled to an unnamed temporary file as
//! they are made (as its decoded audio is) and read back a block at a time by each pass over
//! the windows, which all go in order. An embedding is a unit vector, its values well inside
//! ±1, where half precision keeps three decimal digits: similarities move by less than 0.001.

use crate::voice::embedder::{dot, Embedding, EMBEDDING_DIM};
use half::f16;
use half::slice::HalfFloatSliceExt;
use headroom_base::sync::Locked;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::Path;
use std::sync::Mutex;

/// Windows written to the spool, and read back, at once: 512 KiB.
const BLOCK_ROWS: usize = 1024;
/// Bytes of one window's embedding in the spool.
const ROW_BYTES: usize = EMBEDDING_DIM * 2;

/// The windows' embeddings, by window index.
pub(super) struct WindowVectors {
    rows: usize,
    store: Store,
}

enum Store {
    Memory(Vec<f16>),
    /// Rows `0..written` in the file, the rest (fewer than a block) in `tail`.
    Spooled {
        file: Mutex<File>,
        written: usize,
        tail: Vec<f16>,
    },
}

impl WindowVectors {
    /// Held in memory (a clip, a benchmark's conversation already in memory).
    pub(super) fn with_capacity(windows: usize) -> WindowVectors {
        WindowVectors {
            rows: 0,
            store: Store::Memory(Vec::with_capacity(windows * EMBEDDING_DIM)),
        }
    }

    /// Spooled to an unnamed temporary file in `dir` (the system removes it when it is closed,
    /// even after a crash).
    pub(super) fn spooled(dir: &Path) -> std::io::Result<WindowVectors> {
        Ok(WindowVectors {
            rows: 0,
            store: Store::Spooled {
                file: Mutex::new(tempfile::tempfile_in(dir)?),
                written: 0,
                tail: Vec::with_capacity(BLOCK_ROWS * EMBEDDING_DIM),
            },
        })
    }

    pub(super) fn push(&mut self, embedding: &Embedding) -> std::io::Result<()> {
        let half = embedding.values().iter().map(|v| f16::from_f32(*v));
        match &mut self.store {
            Store::Memory(values) => values.extend(half),
            Store::Spooled {
                file,
                written,
                tail,
            } => {
                tail.extend(half);
                if tail.len() == BLOCK_ROWS * EMBEDDING_DIM {
                    let bytes: Vec<u8> = tail
                        .iter()
                        .flat_map(|v| v.to_bits().to_le_bytes())
                        .collect();
                    let mut file = file.locked();
                    file.seek(SeekFrom::Start((*written * ROW_BYTES) as u64))?;
                    file.write_all(&bytes)?;
                    *written += BLOCK_ROWS;
                    tail.clear();
                }
            }
        }
        self.rows += 1;
        Ok(())
    }

    pub(super) fn len(&self) -> usize {
        self.rows
    }

    /// A reader of the rows, best read in order (a spool is read a block at a time).
    pub(super) fn rows(&self) -> Rows<'_> {
        Rows {
            vectors: self,
            block: Vec::new(),
            block_first: usize::MAX,
        }
    }
}

/// Reads a [`WindowVectors`]' rows, keeping the block of the spool it read last.
pub(super) struct Rows<'a> {
    vectors: &'a WindowVectors,
    block: Vec<f16>,
    /// The first row of `block` (`usize::MAX`: none read yet).
    block_first: usize,
}

impl Rows<'_> {
    /// Window `i`'s embedding, in single precision.
    pub(super) fn row(&mut self, i: usize) -> std::io::Result<[f32; EMBEDDING_DIM]> {
        let mut row = [0f32; EMBEDDING_DIM];
        self.half_row(i)?.convert_to_f32_slice(&mut row);
        Ok(row)
    }

    fn half_row(&mut self, i: usize) -> std::io::Result<&[f16]> {
        let at = |values: &[f16], k: usize| -> std::io::Result<usize> {
            let end = (k + 1) * EMBEDDING_DIM;
            if end > values.len() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("window {i} is not among the embeddings kept"),
                ));
            }
            Ok(k * EMBEDDING_DIM)
        };
        let vectors = self.vectors;
        match &vectors.store {
            Store::Memory(values) => {
                let from = at(values, i)?;
                Ok(&values[from..from + EMBEDDING_DIM])
            }
            Store::Spooled { tail, written, .. } if i >= *written => {
                let from = at(tail, i - written)?;
                Ok(&tail[from..from + EMBEDDING_DIM])
            }
            Store::Spooled { file, written, .. } => {
                let first = i / BLOCK_ROWS * BLOCK_ROWS;
                if self.block_first != first {
                    let count = BLOCK_ROWS.min(written - first);
                    let mut bytes = vec![0u8; count * ROW_BYTES];
                    {
                        let mut file = file.locked();
                        file.seek(SeekFrom::Start((first * ROW_BYTES) as u64))?;
                        file.read_exact(&mut bytes)?;
                    }
                    self.block.clear();
                    self.block.extend(
                        bytes
                            .chunks_exact(2)
                            .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]]))),
                    );
                    self.block_first = first;
                }
                let from = at(&self.block, i - first)?;
                Ok(&self.block[from..from + EMBEDDING_DIM])
            }
        }
    }

    /// Cosine similarity of window `i` to `other`.
    pub(super) fn similarity(&mut self, i: usize, other: &Embedding) -> std::io::Result<f32> {
        Ok(dot(&self.row(i)?, other.values()))
    }

    /// The normalised mean of the windows `range`; `None` for none.
    pub(super) fn mean(&mut self, range: Range<usize>) -> std::io::Result<Option<Embedding>> {
        let mut sum = vec![0f32; EMBEDDING_DIM];
        for i in range {
            for (s, v) in sum.iter_mut().zip(self.row(i)?) {
                *s += v;
            }
        }
        Ok(Embedding::new(sum))
    }

    /// Each of `groups` groups' normalised mean, the windows grouped by `group_of` (`None`
    /// for a group with no windows), in one pass over them.
    pub(super) fn means_by(
        &mut self,
        group_of: &[usize],
        groups: usize,
    ) -> std::io::Result<Vec<Option<Embedding>>> {
        let mut sums = vec![[0f32; EMBEDDING_DIM]; groups];
        let mut counts = vec![0usize; groups];
        for (i, &g) in group_of.iter().enumerate() {
            if g >= groups {
                continue;
            }
            let row = self.row(i)?;
            for (s, v) in sums[g].iter_mut().zip(row) {
                *s += v;
            }
            counts[g] += 1;
        }
        Ok(sums
            .into_iter()
            .zip(counts)
            .map(|(sum, n)| (n > 0).then(|| Embedding::new(sum.to_vec())).flatten())
            .collect())
    }
}

impl FromIterator<Embedding> for WindowVectors {
    fn from_iter<I: IntoIterator<Item = Embedding>>(embeddings: I) -> WindowVectors {
        let mut vectors = WindowVectors::with_capacity(0);
        for e in embeddings {
            vectors
                .push(&e)
                .expect("embeddings held in memory are kept");
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
        let mut rows = vectors.rows();
        for (i, e) in all.iter().enumerate() {
            for other in &all[..5] {
                let exact = e.similarity(other);
                let kept = rows.similarity(i, other).unwrap();
                assert!((exact - kept).abs() < 1e-3, "{i}: {exact} against {kept}");
            }
        }
        let exact = Embedding::mean(all[3..17].iter()).unwrap();
        let kept = rows.mean(3..17).unwrap().unwrap();
        assert!(exact.similarity(&kept) > 0.9999);
        assert!(rows.mean(5..5).unwrap().is_none());
        assert!(rows.row(40).is_err(), "a window past the last one");
    }

    #[test]
    fn a_spool_reads_back_what_memory_holds_across_its_blocks_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        // Two whole blocks and a part of a third (in the tail, not yet written).
        let count = 2 * BLOCK_ROWS + 300;
        let mut spooled = WindowVectors::spooled(dir.path()).unwrap();
        let mut memory = WindowVectors::with_capacity(count);
        for seed in 0..count as u64 {
            let e = embedding(seed);
            spooled.push(&e).unwrap();
            memory.push(&e).unwrap();
        }
        assert_eq!(spooled.len(), count);
        let probe = embedding(99_999);
        let (mut a, mut b) = (spooled.rows(), memory.rows());
        // In order, then out of order (back into an earlier block).
        for i in (0..count).chain([5, 2 * BLOCK_ROWS + 299, BLOCK_ROWS - 1, BLOCK_ROWS]) {
            assert_eq!(a.row(i).unwrap(), b.row(i).unwrap(), "window {i}");
        }
        assert_eq!(
            a.similarity(BLOCK_ROWS + 7, &probe).unwrap(),
            b.similarity(BLOCK_ROWS + 7, &probe).unwrap()
        );
        // Means over a block's edge, and grouped in one pass, as memory's.
        let edge = BLOCK_ROWS - 10..BLOCK_ROWS + 10;
        assert_eq!(
            a.mean(edge.clone()).unwrap().unwrap().values(),
            b.mean(edge).unwrap().unwrap().values()
        );
        let groups: Vec<usize> = (0..count).map(|i| i % 3).collect();
        let (x, y) = (
            a.means_by(&groups, 4).unwrap(),
            b.means_by(&groups, 4).unwrap(),
        );
        assert!(x[3].is_none() && y[3].is_none(), "a group with no windows");
        for g in 0..3 {
            assert_eq!(
                x[g].as_ref().unwrap().values(),
                y[g].as_ref().unwrap().values()
            );
        }
        assert!(a.row(count).is_err());
        // Unnamed: nothing is left in the folder.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn grouped_means_are_the_means_of_each_groups_windows() {
        let all: Vec<Embedding> = (0..12).map(embedding).collect();
        let vectors: WindowVectors = all.iter().cloned().collect();
        let groups = [0, 1, 0, 1, 2, 2, 0, 1, 0, 1, 2, 2];
        let means = vectors.rows().means_by(&groups, 3).unwrap();
        for (g, mean) in means.iter().enumerate() {
            let members: Vec<&Embedding> = groups
                .iter()
                .enumerate()
                .filter(|(_, &k)| k == g)
                .map(|(i, _)| &all[i])
                .collect();
            let exact = Embedding::mean(members).unwrap();
            assert!(
                exact.similarity(mean.as_ref().unwrap()) > 0.9999,
                "group {g}"
            );
        }
    }
}
