//! `docs/protocol-marketdata.md` gives each message's total length: it must be the
//! length the code writes, for every type the code knows, and name no other.

use bourse_marketdata::message::layout_len;

#[test]
fn the_documents_message_table_matches_the_layouts() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    let path = std::path::Path::new(&manifest).join("../../docs/protocol-marketdata.md");
    let document = std::fs::read_to_string(&path).unwrap();
    let mut documented = Vec::new();
    for line in document.lines() {
        // | `A` | add order | ... | 46 |
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() != 6 {
            continue;
        }
        let (Some(kind), Ok(total)) = (
            cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`')),
            cells[4].parse::<usize>(),
        ) else {
            continue;
        };
        let kind = kind.as_bytes();
        assert_eq!(kind.len(), 1, "{line}");
        assert_eq!(layout_len(kind[0]), Some(total), "{line}");
        documented.push(kind[0]);
    }
    let known: Vec<u8> = (0..=255u8).filter(|kind| layout_len(*kind).is_some()).collect();
    documented.sort_unstable();
    assert_eq!(documented, known);
}
