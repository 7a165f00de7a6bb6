//! Updates from a collaboration room, checked before yrs integrates them: yrs trusts an
//! update's layout, and a malformed one can make it corrupt memory, not only fail.

use yrs::Update;
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;

/// The largest clock yrs handles: it subtracts clocks as `i32` while integrating.
const MAX_CLOCK: u32 = i32::MAX as u32;

/// An update laid out as yrs assumes without checking: each client's blocks once, in clock
/// order. A client listed twice in one update yields overlapping blocks, and integrating those
/// makes yrs free a block it still points to (fuzzing found this use-after-free in
/// `BlockStore::push`, yrs 0.28.1). Encoding and decoding again lists every client once with
/// clocks counted from its first block; clocks past `MAX_CLOCK` are refused (a real document
/// never gets near them).
pub(super) fn well_formed(update: Update) -> Result<Update, String> {
    let canonical = Update::decode_v1(&update.encode_v1()).map_err(|e| e.to_string())?;
    let beyond = |ranges: &yrs::IdSet| {
        ranges
            .iter()
            .any(|(_, ranges)| ranges.iter().any(|range| range.end > MAX_CLOCK))
    };
    if beyond(&canonical.insertions(true)) || beyond(canonical.delete_set()) {
        return Err(format!(
            "the update names clocks beyond {MAX_CLOCK}, which no real document reaches"
        ));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use yrs::{Doc, ReadTxn, StateVector, Text, Transact};

    use super::*;
    use crate::document::ynotebook::YNotebook;

    /// One client's blocks as an update v1 carries them: `[blocks, client, clock, block…]`.
    fn client_section(client: u64, text: &str) -> Vec<u8> {
        let doc = Doc::with_client_id(client);
        let shared = doc.get_or_insert_text("t");
        shared.insert(&mut doc.transact_mut(), 0, text);
        let full = doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        // One client and an empty delete set around the section.
        assert_eq!((full[0], full[full.len() - 1]), (1, 0));
        full[1..full.len() - 1].to_vec()
    }

    fn clock_ranges(update: &Update) -> Vec<std::ops::Range<u32>> {
        let insertions = update.insertions(true);
        insertions
            .iter()
            .flat_map(|(_, ranges)| ranges.iter().cloned().collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn a_client_listed_twice_in_an_update_reaches_yrs_once_with_clocks_in_order() {
        let mut twice = vec![2];
        twice.extend(client_section(7, "abc"));
        twice.extend(client_section(7, "de"));
        twice.push(0);
        let raw = Update::decode_v1(&twice).unwrap();
        // As decoded, the second listing overlaps the first (both start at clock 0): the
        // layout that made yrs free a block it still used.
        assert_eq!(clock_ranges(&raw), vec![0..3]);
        assert_eq!(clock_ranges(&well_formed(raw).unwrap()), vec![0..5]);
        let notebook = YNotebook::new();
        notebook.apply_update(&twice).unwrap();
        assert!(notebook.read().is_ok());
    }

    #[test]
    fn an_update_with_clocks_beyond_what_yrs_counts_is_refused() {
        let mut section = client_section(7, "abc");
        // `[1, 7, 0, …]`: one block of client 7 at clock 0; put it at clock 3·10⁹ instead.
        assert_eq!(&section[..3], &[1, 7, 0]);
        section.splice(2..3, [0x80, 0xbc, 0xc1, 0x96, 0x0b]);
        let update = [&[1][..], &section, &[0]].concat();
        let error = YNotebook::new().apply_update(&update).unwrap_err();
        assert!(error.contains("beyond"), "{error}");
    }
}
