//! A segment's typed text, saved as a line appended to `edits.jsonl` beside the manifest: a
//! pause in typing on a three-hour transcript writes the change (a hundred bytes, synced), not
//! a rewrite of a manifest of megabytes. Opening the project replays the lines onto the
//! manifest; the next whole save folds them in and removes the file.
//!
//! Each line names the manifest it was written on (that manifest's `modified_unix_ms`). A whole
//! save stamps the manifest later than every line it folded in, so lines a crash left behind
//! between the manifest's write and the file's removal name an older manifest and are skipped:
//! nothing is applied twice, or onto a transcript it was not typed on. A line a crash cut short
//! is skipped too (each line is whole or nothing), and the next append starts a line of its own.

use super::{Project, ProjectError, ProjectSegment};
use headroom_base::clock::unix_ms;
use headroom_base::fsutil::{sync_dir, Beneath};
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom, Write};

/// The journal of typed edits, in the project's folder.
pub(crate) const EDITS: &str = "edits.jsonl";

/// A journal this long is folded into the manifest by the next edit: opening stays quick and
/// the file small, while typing writes lines, not manifests, nearly always.
const FOLD_AT_LINES: usize = 256;
/// The same, by size (a few very long segments typed into).
pub(crate) const FOLD_AT_BYTES: u64 = 1 << 20;

/// One saved text edit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TextEdit {
    /// The `modified_unix_ms` of the manifest this edit was typed on.
    base: u64,
    /// The project's modification time after it.
    modified: u64,
    segment: usize,
    text: String,
}

/// What the journal held when the project was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Journal {
    /// Lines applied to the manifest.
    pub lines: usize,
    pub bytes: u64,
}

impl Journal {
    fn wants_folding(&self) -> bool {
        self.lines >= FOLD_AT_LINES || self.bytes >= FOLD_AT_BYTES
    }
}

/// Puts `text` into a segment: a cleanup suggestion made from the old text, and the word times
/// of it, no longer apply. `false` when the text is what it was (nothing to save).
pub(crate) fn set_segment_text(segment: &mut ProjectSegment, text: &str) -> bool {
    if segment.text == text {
        return false;
    }
    segment.text = text.to_string();
    segment.suggestion = None;
    segment.words.clear();
    true
}

/// The journal's edits typed on the manifest stamped `base`, in order.
fn edits_on(beneath: &Beneath, base: u64) -> Result<(Vec<TextEdit>, u64), ProjectError> {
    let mut bytes = Vec::new();
    match beneath.open_file(EDITS) {
        Ok(file) => {
            // Read to a bound: a journal past it was never written by an edit (they fold long
            // before), so what is beyond it is not this project's.
            file.take(FOLD_AT_BYTES * 4)
                .read_to_end(&mut bytes)
                .map_err(ProjectError::from_io(&beneath.shown(EDITS)))?;
        }
        Err(e) if e.is_not_found() => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e.into()),
    }
    let edits = bytes
        .split(|b| *b == b'\n')
        // A line cut short by a crash, or empty, reads as nothing.
        .filter_map(|line| serde_json::from_slice::<TextEdit>(line).ok())
        // Lines typed on a manifest saved whole since are not this one's.
        .filter(|edit| edit.base == base)
        .collect();
    Ok((edits, bytes.len() as u64))
}

/// The project's modification time with the journal's edits typed on the manifest stamped
/// `base` (for a listing, which needs no more of them).
pub(crate) fn modified_with_edits(beneath: &Beneath, base: u64) -> Result<u64, ProjectError> {
    let (edits, _) = edits_on(beneath, base)?;
    Ok(edits.iter().map(|e| e.modified).fold(base, u64::max))
}

/// Applies the journal's edits typed on `project` (as its manifest was read) to it.
pub(crate) fn replay(beneath: &Beneath, project: &mut Project) -> Result<Journal, ProjectError> {
    let (edits, bytes) = edits_on(beneath, project.modified_unix_ms)?;
    let mut journal = Journal { lines: 0, bytes };
    for edit in edits {
        let Some(segment) = project.segments.get_mut(edit.segment) else {
            continue;
        };
        set_segment_text(segment, &edit.text);
        project.modified_unix_ms = project.modified_unix_ms.max(edit.modified);
        journal.lines += 1;
    }
    Ok(journal)
}

/// What [`append`] decided.
pub(crate) enum Saved {
    /// The edit is a line of the journal.
    Appended,
    /// The journal was long: the caller saves the manifest whole (which folds it in).
    FoldNow,
}

/// Saves the edit of `segment` (already applied to `project`, as opened with `journal`) as a
/// line of the journal, synced before this returns; the project's modification time moves on.
/// `base` is the manifest's own `modified_unix_ms` (before the journal was replayed).
pub(crate) fn append(
    beneath: &Beneath,
    project: &mut Project,
    base: u64,
    journal: Journal,
    segment: usize,
) -> Result<Saved, ProjectError> {
    project.modified_unix_ms = unix_ms().max(project.modified_unix_ms + 1);
    let edit = TextEdit {
        base,
        modified: project.modified_unix_ms,
        segment,
        text: project.segments[segment].text.clone(),
    };
    let mut line = serde_json::to_vec(&edit).expect("an edit serializes");
    line.push(b'\n');
    // The journal stays under the bound it is read to: an edit that would take it past the
    // folding size (a pasted chapter) goes into the manifest instead of being cut off there.
    if journal.wants_folding() || journal.bytes + line.len() as u64 > FOLD_AT_BYTES {
        return Ok(Saved::FoldNow);
    }
    let path = beneath.shown(EDITS);
    let (new, torn) = match beneath.open_file(EDITS) {
        Ok(mut file) => (
            false,
            !ends_with_newline(&mut file).map_err(ProjectError::from_io(&path))?,
        ),
        Err(e) if e.is_not_found() => (true, false),
        Err(e) => return Err(e.into()),
    };
    if torn {
        // A line a crash cut short stays unreadable on its own.
        line.insert(0, b'\n');
    }
    let mut file = beneath.open_or_create(EDITS)?;
    file.seek(SeekFrom::End(0))
        .and_then(|_| file.write_all(&line))
        .and_then(|()| file.sync_data())
        .map_err(ProjectError::from_io(&path))?;
    if new {
        sync_dir(beneath.root()).map_err(ProjectError::from_io(beneath.root()))?;
    }
    Ok(Saved::Appended)
}

/// Whether the file is empty or ends a line.
fn ends_with_newline(file: &mut std::fs::File) -> std::io::Result<bool> {
    if file.metadata()?.len() == 0 {
        return Ok(true);
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::End(-1))?;
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// Removes the journal once the manifest holds its edits (after a whole save).
pub(crate) fn remove(beneath: &Beneath) -> Result<(), ProjectError> {
    match beneath.remove_file(EDITS) {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}
