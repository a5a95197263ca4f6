//! The files generated from the signals table: the Prometheus rules and the README's table.
//! After changing `headroom_core::signals::SIGNALS`, regenerate both with
//! `HEADROOM_WRITE_RULES=1 cargo test -p headroom-core --test signals` and commit them.

use headroom_core::signals::{prometheus_rules_yaml, readme_table, RULES_PATH};
use std::path::PathBuf;

const REGENERATE: &str = "HEADROOM_WRITE_RULES=1 cargo test -p headroom-core --test signals";
const TABLE_START: &str =
    "<!-- signals table: generated from crates/headroom-core/src/signals/mod.rs -->\n";
const TABLE_END: &str = "<!-- end of the signals table -->\n";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn write_wanted() -> bool {
    std::env::var_os("HEADROOM_WRITE_RULES").is_some()
}

#[test]
fn signals_rules_file_matches_the_table() {
    let path = repository().join(RULES_PATH);
    let generated = prometheus_rules_yaml();
    if write_wanted() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{RULES_PATH} differs from the signals table in crates/headroom-core/src/signals/mod.rs: \
         regenerate it with `{REGENERATE}` and commit it"
    );
}

#[test]
fn signals_readme_table_matches_the_table() {
    let path = repository().join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let (Some(start), Some(end)) = (readme.find(TABLE_START), readme.find(TABLE_END)) else {
        panic!("README.md has no signals table between {TABLE_START:?} and {TABLE_END:?}");
    };
    let start = start + TABLE_START.len();
    let generated = readme_table();
    if write_wanted() && readme[start..end] != generated {
        let updated = format!("{}{generated}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        readme[start..end] == generated,
        "README.md's signals table differs from crates/headroom-core/src/signals/mod.rs: \
         regenerate it with `{REGENERATE}` and commit it"
    );
}
