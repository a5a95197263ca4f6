//! What a file is, from its first bytes, and the structural checks a container needs before a
//! decoder reads it: symphonia 0.5 sizes some buffers from lengths the file declares, before
//! reading what they describe, so four crafted bytes could ask for gigabytes.
//!
//! A file must start with its format's marker (after an ID3v2 tag or zero padding, as real
//! files do): symphonia's probe would otherwise search the first megabyte for any marker, and
//! the checks below would look at a different place than the decoder.

use std::io::{Read, Seek, SeekFrom};

/// The containers Headroom reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Container {
    Wav,
    Flac,
    Mp4,
    Ogg,
    /// MPEG audio frames: MP3, or AAC in ADTS.
    Mpeg,
    /// EBML: Matroska (MKV) and WebM.
    Matroska,
}

#[derive(Debug)]
pub(super) enum SniffError {
    /// No marker of a format Headroom reads where one must be.
    Unknown,
    /// A declared length that the file cannot hold.
    Malformed(String),
    Io(std::io::Error),
}

impl From<std::io::Error> for SniffError {
    fn from(e: std::io::Error) -> Self {
        SniffError::Io(e)
    }
}

/// Zero bytes of padding allowed before the marker.
const MAX_PADDING: u64 = 64 * 1024;
/// How deep MP4 boxes may nest (real files: under 10).
const MAX_BOX_DEPTH: u32 = 16;

/// Finds the container and checks its declared lengths.
pub(super) fn check<R: Read + Seek>(source: &mut R) -> Result<Container, SniffError> {
    let len = source.seek(SeekFrom::End(0))?;
    let mut start = 0;
    let head = read_at(source, 0, 10)?;
    if head.starts_with(b"ID3") && head.len() == 10 {
        let size = head[6..10]
            .iter()
            .fold(0u64, |n, &b| (n << 7) | u64::from(b & 0x7f));
        let footer = if head[5] & 0x10 != 0 { 10 } else { 0 };
        start = 10 + size + footer;
    }
    let container = match classify(&read_at(source, start, 12)?) {
        Some(c) => c,
        None => {
            // Zero padding before the first frame (an MP4 starts with zero bytes of its own
            // first box's size, so this comes second).
            start = skip_zeros(source, start, len)?;
            classify(&read_at(source, start, 12)?).ok_or(SniffError::Unknown)?
        }
    };
    match container {
        Container::Flac => flac_metadata_fits(source, start).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => SniffError::Malformed(e.to_string()),
            _ => SniffError::Io(e),
        })?,
        Container::Mp4 => boxes_fit(source, start, len, 0, false)?,
        Container::Matroska => elements_fit(source, start, len, 0)?,
        _ => {}
    }
    Ok(container)
}

fn classify(head: &[u8]) -> Option<Container> {
    if head.starts_with(b"RIFF") && head.get(8..12) == Some(&b"WAVE"[..]) {
        Some(Container::Wav)
    } else if head.starts_with(b"fLaC") {
        Some(Container::Flac)
    } else if head.get(4..8) == Some(&b"ftyp"[..]) {
        Some(Container::Mp4)
    } else if head.starts_with(b"OggS") {
        Some(Container::Ogg)
    } else if head.starts_with(&EBML_MAGIC) {
        Some(Container::Matroska)
    } else if head.len() >= 2 && head[0] == 0xff && head[1] & 0xe0 == 0xe0 {
        Some(Container::Mpeg)
    } else {
        None
    }
}

/// The first non-zero byte at or after `start`, looking at most [`MAX_PADDING`] bytes ahead.
fn skip_zeros<R: Read + Seek>(source: &mut R, start: u64, len: u64) -> std::io::Result<u64> {
    let mut at = start;
    while at < len && at - start < MAX_PADDING {
        let chunk = read_at(source, at, 4096)?;
        match chunk.iter().position(|&b| b != 0) {
            Some(n) => return Ok(at + n as u64),
            None => at += chunk.len() as u64,
        }
    }
    Ok(at)
}

/// Up to `n` bytes at `at` (fewer at the end of the file).
fn read_at<R: Read + Seek>(source: &mut R, at: u64, n: usize) -> std::io::Result<Vec<u8>> {
    source.seek(SeekFrom::Start(at))?;
    let mut buf = Vec::with_capacity(n);
    source.by_ref().take(n as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

/// symphonia 0.5 allocates a FLAC comment's or picture's fields at their declared length
/// before reading them: four bytes could ask for 4 GiB. A metadata block holds at most 16 MiB,
/// so a field declared longer than what is left of its block is refused here first. Blocks
/// that are merely cut short are left for symphonia to report.
fn flac_metadata_fits<R: Read + Seek>(source: &mut R, start: u64) -> std::io::Result<()> {
    /// Whether every length-prefixed field of a comment block (little-endian lengths) or a
    /// picture block (big-endian) fits in what is left of it.
    fn lengths_fit(mut rest: &[u8], big_endian: bool, comment: bool) -> bool {
        let read_u32 = |rest: &mut &[u8]| {
            let (n, tail) = rest.split_first_chunk::<4>()?;
            *rest = tail;
            Some(if big_endian {
                u32::from_be_bytes(*n)
            } else {
                u32::from_le_bytes(*n)
            } as usize)
        };
        let field = |rest: &mut &[u8]| match read_u32(rest) {
            Some(len) if len > rest.len() => Err(()),
            Some(len) => {
                *rest = &rest[len..];
                Ok(true)
            }
            None => Ok(false),
        };
        let fields = if comment {
            // The vendor string, then `n` comments.
            match (field(&mut rest), read_u32(&mut rest)) {
                (Ok(true), Some(n)) => (0..n).map(|_| field(&mut rest)).find(|f| f != &Ok(true)),
                (Err(()), _) => Some(Err(())),
                _ => None,
            }
        } else {
            // Picture type, media type, description, 16 bytes of dimensions, data.
            rest = rest.get(4..).unwrap_or_default();
            let (media, desc) = (field(&mut rest), field(&mut rest));
            rest = rest.get(16..).unwrap_or_default();
            [media, desc, field(&mut rest)]
                .into_iter()
                .find(|f| f != &Ok(true))
        };
        fields != Some(Err(()))
    }

    source.seek(SeekFrom::Start(start + 4))?;
    let mut header = [0u8; 4];
    while source.read_exact(&mut header).is_ok() {
        let len = u64::from(u32::from_be_bytes([0, header[1], header[2], header[3]]));
        let kind = header[0] & 0x7f;
        if kind == 4 || kind == 6 {
            let mut block = Vec::new();
            source.by_ref().take(len).read_to_end(&mut block)?;
            if !lengths_fit(&block, kind == 6, kind == 4) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "a FLAC metadata field is declared longer than its block",
                ));
            }
        } else {
            source.seek(SeekFrom::Current(len as i64))?;
        }
        if header[0] & 0x80 != 0 {
            break;
        }
    }
    Ok(())
}

/// MP4 boxes whose children are boxes.
const MP4_CONTAINERS: [&[u8; 4]; 12] = [
    b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"dinf", b"udta", b"mvex", b"moof",
    b"traf", b"ilst",
];

/// Checks that every MP4 box between `start` and `end` fits in what holds it, and that every
/// sample table's entry count fits in its box (symphonia reserves the count before reading).
/// At the top level a media data box cut short (a download that stopped) is let through.
fn boxes_fit<R: Read + Seek>(
    source: &mut R,
    start: u64,
    end: u64,
    depth: u32,
    items: bool,
) -> Result<(), SniffError> {
    if depth > MAX_BOX_DEPTH {
        return Err(SniffError::Malformed("MP4 boxes nested too deep".into()));
    }
    let mut pos = start;
    while end - pos >= 8 {
        let header = read_at(source, pos, 16)?;
        let kind: [u8; 4] = header[4..8].try_into().expect("8 bytes read");
        let shown = String::from_utf8_lossy(&kind).into_owned();
        let (size, header_len) = match u32::from_be_bytes(header[..4].try_into().expect("4")) {
            0 => (end - pos, 8),
            1 if header.len() == 16 => {
                (u64::from_be_bytes(header[8..16].try_into().expect("8")), 16)
            }
            1 => {
                return Err(SniffError::Malformed(format!(
                    "the MP4 box {shown:?} is cut short"
                )))
            }
            n => (u64::from(n), 8),
        };
        if size < header_len {
            return Err(SniffError::Malformed(format!(
                "the MP4 box {shown:?} declares {size} bytes, less than its own header"
            )));
        }
        if size > end - pos {
            if depth == 0 && &kind == b"mdat" {
                return Ok(());
            }
            return Err(SniffError::Malformed(format!(
                "the MP4 box {shown:?} declares {size} bytes, more than the {} that hold it",
                end - pos
            )));
        }
        let (body, body_end) = (pos + header_len, pos + size);
        if items || MP4_CONTAINERS.contains(&&kind) {
            boxes_fit(source, body, body_end, depth + 1, &kind == b"ilst")?;
        } else if &kind == b"meta" {
            // ISO's meta box has a version and flags before its children; QuickTime's has not.
            let iso = body_end - body >= 4
                && boxes_fit(source, body + 4, body_end, depth + 1, false).is_ok();
            if !iso {
                boxes_fit(source, body, body_end, depth + 1, false)?;
            }
        } else if let Some(entry) = match &kind {
            b"stco" | b"stss" => Some(4),
            b"co64" | b"stts" | b"ctts" => Some(8),
            b"stsc" => Some(12),
            _ => None,
        } {
            table_fits(source, &shown, body, body_end, 4, entry)?;
        } else if &kind == b"stsz" {
            // A sample size of 0 means a table of sizes follows the count.
            let fields = read_at(source, body, 12)?;
            if fields.len() == 12 && fields[4..8] == [0; 4] {
                table_fits(source, &shown, body, body_end, 8, 4)?;
            }
        }
        pos += size;
    }
    Ok(())
}

/// Whether the entry count at `body + count_at` times `entry` bytes fits after it.
fn table_fits<R: Read + Seek>(
    source: &mut R,
    shown: &str,
    body: u64,
    body_end: u64,
    count_at: u64,
    entry: u64,
) -> Result<(), SniffError> {
    let count = read_at(source, body + count_at, 4)?;
    let Ok(count) = <[u8; 4]>::try_from(count.as_slice()) else {
        return Ok(()); // cut short: the decoder reports it
    };
    let count = u64::from(u32::from_be_bytes(count));
    let room = body_end.saturating_sub(body + count_at + 4);
    if count * entry > room {
        return Err(SniffError::Malformed(format!(
            "the MP4 table {shown:?} declares {count} entries, more than its {room} bytes hold"
        )));
    }
    Ok(())
}

/// The EBML header's id: a Matroska or WebM file starts with it.
const EBML_MAGIC: [u8; 4] = [0x1A, 0x45, 0xDF, 0xA3];

/// Matroska elements whose children are elements (those symphonia's demuxer reads as such).
const EBML_MASTERS: [u32; 34] = [
    0x1A45DFA3, 0x18538067, 0x114D9B74, 0x4DBB, 0x1549A966, 0x1F43B675, 0xA0, 0x75A1, 0xA6,
    0x1654AE6B, 0xAE, 0xE0, 0xE1, 0x6D80, 0x6240, 0x5035, 0x47E7, 0x55B0, 0x55D0, 0x1C53BB6B, 0xBB,
    0xB7, 0x1043A770, 0x45B9, 0xB6, 0x80, 0x1254C367, 0x7373, 0x63C0, 0x67C8, 0x1941A469, 0x61A7,
    0xE2, 0x5034,
];

/// The longest element holding data (a block of a track, a codec's header, a tag) Headroom
/// reads: symphonia holds each whole while it reads it.
const MAX_EBML_DATA: u64 = 64 << 20;

/// An EBML variable-length integer at the start of `bytes`: its value (with the length
/// marker kept for ids, as ids are written) and length; `None` if it is not one.
fn ebml_vint(bytes: &[u8], keep_marker: bool) -> Option<(u64, usize)> {
    let first = *bytes.first()?;
    let len = first.leading_zeros() as usize + 1;
    if len > 8 || bytes.len() < len {
        return None;
    }
    let marker = if keep_marker { 0 } else { 0x80u8 >> (len - 1) };
    let value = bytes[1..len]
        .iter()
        .fold(u64::from(first & !marker), |v, &b| (v << 8) | u64::from(b));
    Some((value, len))
}

/// Checks that every Matroska element between `start` and `end` declares a size that fits in
/// what holds it, and no element of data over [`MAX_EBML_DATA`]: symphonia allocates an
/// element's declared size before reading it. An element of unknown size (a recording
/// streamed live, as a browser writes it) is refused: symphonia would read it as empty.
fn elements_fit<R: Read + Seek>(
    source: &mut R,
    start: u64,
    end: u64,
    depth: u32,
) -> Result<(), SniffError> {
    if depth > MAX_BOX_DEPTH {
        return Err(SniffError::Malformed(
            "Matroska elements nested too deep".into(),
        ));
    }
    let malformed = |m: String| SniffError::Malformed(m);
    let mut pos = start;
    let mut header = Vec::with_capacity(12);
    while pos < end {
        header.clear();
        source.seek(SeekFrom::Start(pos))?;
        source
            .by_ref()
            .take(12.min(end - pos))
            .read_to_end(&mut header)?;
        let (id, id_len) = ebml_vint(&header, true)
            .filter(|&(_, n)| n <= 4)
            .ok_or_else(|| malformed(format!("no Matroska element at byte {pos}")))?;
        let (size, size_len) = ebml_vint(&header[id_len..], false)
            .ok_or_else(|| malformed(format!("the Matroska element {id:#x} is cut short")))?;
        if size == (1u64 << (7 * size_len)) - 1 {
            return Err(malformed(format!(
                "the Matroska element {id:#x} has no size (a recording streamed live); \
                 remux it first, e.g. `ffmpeg -i in.webm -c copy out.webm`"
            )));
        }
        let body = pos + (id_len + size_len) as u64;
        let room = end.saturating_sub(body);
        if size > room {
            return Err(malformed(format!(
                "the Matroska element {id:#x} declares {size} bytes, more than the {room} that hold it"
            )));
        }
        if EBML_MASTERS.contains(&(id as u32)) {
            elements_fit(source, body, body + size, depth + 1)?;
            if id == EBML_TRACK_ENTRY {
                flac_track_starts_with_streaminfo(source, body, body + size)?;
            }
        } else if size > MAX_EBML_DATA {
            return Err(malformed(format!(
                "the Matroska element {id:#x} declares {size} bytes; Headroom reads at most {MAX_EBML_DATA} at once"
            )));
        }
        pos = body + size;
    }
    Ok(())
}

/// A Matroska track's entry.
const EBML_TRACK_ENTRY: u64 = 0xAE;

/// symphonia reads a Matroska FLAC track's header (its `CodecPrivate`) block by block until
/// STREAMINFO, rereading the first block's kind: a first block of another kind and no length
/// loops forever (found by fuzzing). STREAMINFO comes first in every real file.
fn flac_track_starts_with_streaminfo<R: Read + Seek>(
    source: &mut R,
    start: u64,
    end: u64,
) -> Result<(), SniffError> {
    let (mut codec, mut private) = (None, None);
    let mut pos = start;
    while pos < end {
        let header = read_at(source, pos, 12.min(end - pos) as usize)?;
        let Some((id, id_len)) = ebml_vint(&header, true) else {
            break;
        };
        let Some((size, size_len)) = ebml_vint(&header[id_len..], false) else {
            break;
        };
        let body = pos + (id_len + size_len) as u64;
        match id {
            0x86 => codec = Some(read_at(source, body, size.min(16) as usize)?),
            0x63A2 => private = Some(read_at(source, body, 5.min(size) as usize)?),
            _ => {}
        }
        pos = body.saturating_add(size);
    }
    let is_flac = codec.is_some_and(|c| c.split(|&b| b == 0).next() == Some(&b"A_FLAC"[..]));
    let streaminfo_first = |p: &Vec<u8>| p.len() == 5 && p.starts_with(b"fLaC") && p[4] & 0x7f == 0;
    if is_flac && !private.as_ref().is_none_or(streaminfo_first) {
        return Err(SniffError::Malformed(
            "a Matroska FLAC track's header does not start with its STREAMINFO".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn mp4_box(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut b = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        b.extend_from_slice(kind);
        b.extend_from_slice(body);
        b
    }

    fn m4a(stbl_children: &[u8]) -> Vec<u8> {
        let stbl = mp4_box(b"stbl", stbl_children);
        let moov = mp4_box(
            b"moov",
            &mp4_box(b"trak", &mp4_box(b"mdia", &mp4_box(b"minf", &stbl))),
        );
        let mut file = mp4_box(b"ftyp", b"M4A \0\0\0\0M4A ");
        file.extend(moov);
        file.extend(mp4_box(b"mdat", &[0; 32]));
        file
    }

    fn check_bytes(bytes: Vec<u8>) -> Result<Container, SniffError> {
        check(&mut Cursor::new(bytes))
    }

    #[test]
    fn markers_are_found_after_id3_and_padding_and_nowhere_else() {
        let mut id3 = b"ID3\x04\x00\x00\x00\x00\x00\x05".to_vec();
        id3.extend([0xff, 0xfb, 0x90, 0x64, 0]);
        id3.extend([0xff, 0xfb, 0x90, 0x64]);
        assert!(matches!(check_bytes(id3), Ok(Container::Mpeg)));
        let mut padded = vec![0u8; 5000];
        padded.extend(b"OggS\0\0");
        assert!(matches!(check_bytes(padded), Ok(Container::Ogg)));
        // A marker after junk is not where a decoder would start: refused, not probed for.
        let mut junk = b"not audio at all ".to_vec();
        junk.extend(b"fLaC");
        assert!(matches!(check_bytes(junk), Err(SniffError::Unknown)));
    }

    #[test]
    fn sample_tables_must_fit_their_boxes() {
        let mut stco = vec![0u8; 4];
        stco.extend(2u32.to_be_bytes());
        stco.extend([0u8; 8]);
        assert!(matches!(
            check_bytes(m4a(&mp4_box(b"stco", &stco))),
            Ok(Container::Mp4)
        ));
        // The fuzzer's file: an stco of 12 bytes that declares 400 million offsets.
        let mut huge = vec![0u8; 4];
        huge.extend(0x1800_0000u32.to_be_bytes());
        huge.extend([0u8; 4]);
        let err = check_bytes(m4a(&mp4_box(b"stco", &huge))).unwrap_err();
        assert!(
            matches!(&err, SniffError::Malformed(m) if m.contains("\"stco\" declares 402653184 entries")),
            "{err:?}"
        );
        let mut stsz = vec![0u8; 8];
        stsz.extend(u32::MAX.to_be_bytes());
        assert!(matches!(
            check_bytes(m4a(&mp4_box(b"stsz", &stsz))),
            Err(SniffError::Malformed(_))
        ));
        // A constant sample size needs no table.
        let mut constant = vec![0u8; 4];
        constant.extend(1024u32.to_be_bytes());
        constant.extend(u32::MAX.to_be_bytes());
        assert!(check_bytes(m4a(&mp4_box(b"stsz", &constant))).is_ok());
    }

    /// An EBML element: its id as written, a size of 8 bytes, its body.
    fn element(id: &[u8], body: &[u8]) -> Vec<u8> {
        let mut e = id.to_vec();
        e.push(0x01);
        e.extend(&(body.len() as u64).to_be_bytes()[1..]);
        e.extend(body);
        e
    }

    fn mkv(segment_children: &[u8]) -> Vec<u8> {
        let mut file = element(&EBML_MAGIC, &element(&[0x42, 0x82], b"webm"));
        file.extend(element(&[0x18, 0x53, 0x80, 0x67], segment_children));
        file
    }

    #[test]
    fn matroska_elements_must_fit_what_holds_them() {
        let block = element(&[0xA3], &[0x81, 0, 0, 0x80, 1, 2, 3]);
        let cluster = element(
            &[0x1F, 0x43, 0xB6, 0x75],
            &[element(&[0xE7], &[0]), block].concat(),
        );
        let tracks = element(
            &[0x16, 0x54, 0xAE, 0x6B],
            &element(&[0xAE], &element(&[0x86], b"A_OPUS")),
        );
        let good = mkv(&[tracks.clone(), cluster.clone()].concat());
        assert!(matches!(check_bytes(good), Ok(Container::Matroska)));
        // A block declaring 4 GB inside a cluster of a few bytes.
        let mut lying = cluster.clone();
        let at = 4 + 8 + 10 + 1; // the cluster's header, its timecode, the block's id
        lying[at..at + 8].copy_from_slice(&[0x01, 0, 0, 1, 0, 0, 0, 0]);
        let err = check_bytes(mkv(&[tracks.clone(), lying].concat())).unwrap_err();
        assert!(
            matches!(&err, SniffError::Malformed(m) if m.contains("0xa3 declares 4294967296 bytes")),
            "{err:?}"
        );
        // The same inside a track's codec header.
        let mut codec = tracks.clone();
        let at = codec.len() - 6 - 8;
        codec[at..at + 8].copy_from_slice(&[0x01, 0, 0, 0, 0xff, 0, 0, 0]);
        assert!(matches!(
            check_bytes(mkv(&codec)),
            Err(SniffError::Malformed(_))
        ));
        // A FLAC track whose header's first block is not STREAMINFO (symphonia loops on it).
        let flac_track = |private: &[u8]| {
            let entry = [element(&[0x86], b"A_FLAC"), element(&[0x63, 0xA2], private)].concat();
            mkv(&element(
                &[0x16, 0x54, 0xAE, 0x6B],
                &element(&[0xAE], &entry),
            ))
        };
        let mut streaminfo = b"fLaC".to_vec();
        streaminfo.extend([0x80, 0, 0, 34]);
        streaminfo.extend([0u8; 34]);
        assert!(matches!(
            check_bytes(flac_track(&streaminfo)),
            Ok(Container::Matroska)
        ));
        let padding_first = [b"fLaC".as_slice(), &[0x01, 0, 0, 0]].concat();
        assert!(matches!(
            check_bytes(flac_track(&padding_first)),
            Err(SniffError::Malformed(m)) if m.contains("STREAMINFO")
        ));
        // A segment streamed live: no size.
        let mut live = element(&EBML_MAGIC, &element(&[0x42, 0x82], b"webm"));
        live.extend([0x18, 0x53, 0x80, 0x67, 0xFF]);
        live.extend(&cluster);
        let err = check_bytes(live).unwrap_err();
        assert!(
            matches!(&err, SniffError::Malformed(m) if m.contains("no size")),
            "{err:?}"
        );
        // Nested past any real file.
        let mut deep = element(&[0xA0], &[]);
        for _ in 0..20 {
            deep = element(&[0xA0], &deep);
        }
        assert!(matches!(
            check_bytes(mkv(&deep)),
            Err(SniffError::Malformed(m)) if m.contains("too deep")
        ));
    }

    #[test]
    fn boxes_must_fit_what_holds_them_except_media_data_cut_short() {
        let mut file = mp4_box(b"ftyp", b"M4A \0\0\0\0M4A ");
        let mut moov = mp4_box(b"moov", &mp4_box(b"udta", &[0; 16]));
        moov[8..12].copy_from_slice(&0xffff_0000u32.to_be_bytes()); // udta claims 4 GB
        file.extend(moov);
        assert!(matches!(
            check_bytes(file.clone()),
            Err(SniffError::Malformed(_))
        ));
        let mut cut = mp4_box(b"ftyp", b"M4A \0\0\0\0M4A ");
        cut.extend(1_000_000u32.to_be_bytes());
        cut.extend(b"mdat");
        cut.extend([0; 100]);
        assert!(check_bytes(cut).is_ok());
    }
}
