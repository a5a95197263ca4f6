//! Paths the user chose in the system's Save dialog. A command that writes outside a project
//! accepts only these, once each: a path typed (or injected) in the web view is not a choice.

use headroom_base::sync::Locked;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Default)]
pub struct ChosenPaths(Mutex<HashSet<PathBuf>>);

impl ChosenPaths {
    /// Records a path the native dialog returned.
    pub fn remember(&self, path: PathBuf) {
        self.0.locked().insert(path);
    }

    /// Whether `path` was chosen in the dialog; a choice is used once.
    pub fn take(&self, path: &Path) -> bool {
        self.0.locked().remove(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_chosen_paths_and_each_once() {
        let chosen = ChosenPaths::default();
        chosen.remember(PathBuf::from("/home/me/Desktop/narration.wav"));
        assert!(!chosen.take(Path::new("/home/me/.bashrc")));
        assert!(chosen.take(Path::new("/home/me/Desktop/narration.wav")));
        assert!(!chosen.take(Path::new("/home/me/Desktop/narration.wav")));
    }
}
