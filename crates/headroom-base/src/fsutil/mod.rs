//! Files of user data: [`atomic`] writes so that a crash or a full disk never leaves a
//! half-written file, and [`Beneath`] keeps every read and write of a folder's files inside
//! that folder.

mod atomic;
mod beneath;

pub use atomic::{
    copy_atomic, copy_atomic_from, remove_stale_temporaries, sync_dir, write_atomic,
    write_atomic_new, write_atomic_private,
};
pub use beneath::{remove_stale_temporaries_beneath, Beneath, BeneathError, Entry, EntryKind};

/// The folder name a user-given name (of a `what`: a project, a voice) is kept under: its
/// letters and digits, lower-cased, other runs of characters as one dash. Refused, with a
/// message to show: an empty name, one of more than `max_chars`, one with no letter or digit.
pub fn folder_name(name: &str, what: &str, max_chars: usize) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("a {what} needs a name"));
    }
    if name.chars().count() > max_chars {
        return Err(format!("a {what} name has at most {max_chars} characters"));
    }
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_alphanumeric() {
            slug.extend(c.to_lowercase());
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_matches('-').to_string();
    if slug.is_empty() {
        return Err(format!("a {what} name needs at least one letter or digit"));
    }
    Ok(slug)
}
