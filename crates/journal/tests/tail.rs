//! The tail reader follows a live journal: every record up to a durable bound, in order,
//! across segments, starting anywhere, and never past the bound.

use bourse_core::command::TransferCommand;
use bourse_core::{Command, Decimal, Seq, TimestampNs};
use bourse_journal::tail::JournalTail;
use bourse_journal::{encode_command, JournalWriter, RecordBatch, ScanReport, WriterOptions};

fn deposit(number: u64) -> Command<'static> {
    Command::Deposit(TransferCommand {
        account: format!("trader{number}").into(),
        asset: "USD".into(),
        amount: Decimal::from_units(i128::from(number), 0),
    })
}

/// A journal of `count` deposits in batches of 7 over 2 KiB segments; returns the
/// writer (still open, as a live journal's is) and each record's crc.
fn journal(dir: &std::path::Path, count: u64) -> (JournalWriter, Vec<u32>) {
    let options = WriterOptions { segment_bytes: 2048, ..WriterOptions::default() };
    let mut writer = JournalWriter::open(dir, &ScanReport::default(), options, Seq(1), 0).unwrap();
    let mut crcs = Vec::new();
    let mut next = 1;
    while next <= count {
        let mut batch = RecordBatch::default();
        for number in next..(next + 7).min(count + 1) {
            batch.push(TimestampNs(number), |out| encode_command(&deposit(number), out)).unwrap();
        }
        writer.write(&mut batch).unwrap();
        writer.sync().unwrap();
        crcs.push(writer.last_crc());
        next += batch.len() as u64;
    }
    (writer, crcs)
}

fn read(tail: &mut JournalTail, until: u64) -> Vec<(u64, u64, Vec<u8>)> {
    let mut seen = Vec::new();
    tail.read_until(Seq(until), |header, payload| {
        seen.push((header.seq.0, header.ts.0, payload.to_vec()))
    })
    .unwrap();
    seen
}

#[test]
fn the_tail_reads_in_order_across_segments_up_to_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (_writer, _) = journal(dir.path(), 100);
    assert!(bourse_journal::segment::list_segments(dir.path()).unwrap().len() >= 3);
    let mut tail = JournalTail::new(dir.path(), Seq(1), 0);
    let first = read(&mut tail, 40);
    assert_eq!(
        first.iter().map(|record| record.0).collect::<Vec<_>>(),
        (1..=40).collect::<Vec<_>>()
    );
    let rest = read(&mut tail, 100);
    assert_eq!(
        rest.iter().map(|record| record.0).collect::<Vec<_>>(),
        (41..=100).collect::<Vec<_>>()
    );
    for (seq, ts, payload) in first.iter().chain(&rest) {
        assert_eq!(*ts, *seq);
        let mut expected = Vec::new();
        encode_command(&deposit(*seq), &mut expected).unwrap();
        assert_eq!(payload, &expected);
    }
    assert!(read(&mut tail, 100).is_empty(), "nothing past what was read");
    assert_eq!(tail.next_seq(), Seq(101));
}

#[test]
fn the_tail_follows_records_written_after_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let (mut writer, _) = journal(dir.path(), 10);
    let mut tail = JournalTail::new(dir.path(), Seq(1), 0);
    assert_eq!(read(&mut tail, 10).len(), 10);
    let mut batch = RecordBatch::default();
    for number in 11..=30 {
        batch.push(TimestampNs(number), |out| encode_command(&deposit(number), out)).unwrap();
    }
    writer.write(&mut batch).unwrap();
    writer.sync().unwrap();
    let later = read(&mut tail, 30);
    assert_eq!(later.first().map(|record| record.0), Some(11));
    assert_eq!(later.len(), 20);
}

#[test]
fn the_tail_starts_inside_a_segment_and_checks_the_chain_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let (_writer, batch_crcs) = journal(dir.path(), 60);
    // Record 21 ends the third batch of 7: start right after it.
    let mut tail = JournalTail::new(dir.path(), Seq(22), batch_crcs[2]);
    let seen = read(&mut tail, 60);
    assert_eq!(
        seen.iter().map(|record| record.0).collect::<Vec<_>>(),
        (22..=60).collect::<Vec<_>>()
    );
    // A wrong predecessor crc is a chain break, not silently accepted.
    let mut wrong = JournalTail::new(dir.path(), Seq(22), batch_crcs[2] ^ 1);
    let error = wrong.read_until(Seq(60), |_, _| {}).unwrap_err();
    assert_eq!(error.code(), "chain_break", "{error}");
}

/// The tail's reads can take in a record the writer is still writing (past the bound
/// it was given): those bytes must be read again once complete, never parsed as they
/// were (a load test found the snapshotter stuck on such a torn record, every 50 ms).
#[test]
fn bytes_read_past_the_bound_while_being_written_are_read_again_later() {
    use bourse_journal::record::framed_len;
    use bourse_journal::segment::{list_segments, SEGMENT_HEADER_LEN};
    let complete_dir = tempfile::tempdir().unwrap();
    let options = WriterOptions::default();
    let mut writer =
        JournalWriter::open(complete_dir.path(), &ScanReport::default(), options, Seq(1), 0)
            .unwrap();
    let mut batch = RecordBatch::default();
    for number in 1..=12 {
        batch.push(TimestampNs(number), |out| encode_command(&deposit(number), out)).unwrap();
    }
    writer.write(&mut batch).unwrap();
    writer.sync().unwrap();
    let segments = list_segments(complete_dir.path()).unwrap();
    let (_, complete_path) = &segments[0];
    let complete = std::fs::read(complete_path).unwrap();
    let record_11_at = SEGMENT_HEADER_LEN
        + (1..=10)
            .map(|number| {
                let mut payload = Vec::new();
                encode_command(&deposit(number), &mut payload).unwrap();
                framed_len(payload.len())
            })
            .sum::<usize>();
    // The live journal: records 1 to 10 durable, record 11 half written, zeros after.
    let live_dir = tempfile::tempdir().unwrap();
    let live_path = live_dir.path().join(complete_path.file_name().unwrap());
    let mut torn = complete.clone();
    torn[record_11_at + 12..].fill(0);
    std::fs::write(&live_path, &torn).unwrap();
    let mut tail = JournalTail::new(live_dir.path(), Seq(1), 0);
    assert_eq!(read(&mut tail, 10).len(), 10);
    // The writer finishes records 11 and 12 and makes them durable.
    std::fs::write(&live_path, &complete).unwrap();
    let rest = read(&mut tail, 12);
    assert_eq!(rest.iter().map(|record| record.0).collect::<Vec<_>>(), [11, 12]);
}
