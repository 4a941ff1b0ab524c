//! Opening command files: a path, `-` for standard input, and transparent gzip for
//! paths ending in `.gz`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

const READ_BUFFER_BYTES: usize = 1 << 20;

pub fn open(path: &Path) -> Result<Box<dyn BufRead>, String> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, io::stdin())));
    }
    let file =
        File::open(path).map_err(|error| format!("cannot open {}: {error}", path.display()))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|extension| extension == "gz") {
        Box::new(MultiGzDecoder::new(BufReader::with_capacity(READ_BUFFER_BYTES, file)))
    } else {
        Box::new(file)
    };
    Ok(Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, reader)))
}

/// The longest line accepted, in bytes. A longer one is skipped up to its newline
/// without being buffered, so no input can make the reader's memory grow without bound.
pub const LINE_BYTES_MAX: usize = 1 << 20;

/// One line of input, without its `\n`.
pub enum Line<'a> {
    Complete(&'a [u8]),
    /// Longer than `LINE_BYTES_MAX`; its bytes were skipped.
    TooLong,
}

/// Calls `each_line` with every line of `reader`. Lines that lie inside the read buffer
/// are handed over in place; only a line split across two refills is copied.
pub fn for_each_line(
    reader: &mut dyn BufRead,
    mut each_line: impl FnMut(Line<'_>) -> Result<(), String>,
) -> Result<(), String> {
    let mut pending: Vec<u8> = Vec::new();
    let mut skipping_long_line = false;
    loop {
        let buffer = reader.fill_buf().map_err(|error| format!("read error: {error}"))?;
        if buffer.is_empty() {
            // The end: a last line without a newline still counts.
            if skipping_long_line {
                each_line(Line::TooLong)?;
            } else if !pending.is_empty() {
                each_line(Line::Complete(&pending))?;
            }
            return Ok(());
        }
        let newline = memchr::memchr(b'\n', buffer);
        let (chunk_bytes, completes_line) = match newline {
            Some(position) => (position, true),
            None => (buffer.len(), false),
        };
        if skipping_long_line {
            if completes_line {
                skipping_long_line = false;
                each_line(Line::TooLong)?;
            }
        } else if pending.len() + chunk_bytes > LINE_BYTES_MAX {
            pending.clear();
            if completes_line {
                each_line(Line::TooLong)?;
            } else {
                skipping_long_line = true;
            }
        } else if completes_line && pending.is_empty() {
            each_line(Line::Complete(&buffer[..chunk_bytes]))?;
        } else {
            pending.extend_from_slice(&buffer[..chunk_bytes]);
            if completes_line {
                each_line(Line::Complete(&pending))?;
                pending.clear();
            }
        }
        reader.consume(chunk_bytes + usize::from(completes_line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines `for_each_line` reports, `None` for one that was too long, read through
    /// a buffer of `buffer_bytes` so that lines cross refills.
    fn lines(input: &[u8], buffer_bytes: usize) -> Vec<Option<Vec<u8>>> {
        let mut reader = BufReader::with_capacity(buffer_bytes, input);
        let mut seen = Vec::new();
        for_each_line(&mut reader, |line| {
            seen.push(match line {
                Line::Complete(bytes) => Some(bytes.to_vec()),
                Line::TooLong => None,
            });
            Ok(())
        })
        .unwrap();
        seen
    }

    #[test]
    fn splits_on_newlines_across_refills_and_keeps_a_last_line_without_newline() {
        let input = b"first line\n\nthird\r\nlast";
        let expected: Vec<Option<Vec<u8>>> = vec![
            Some(b"first line".to_vec()),
            Some(vec![]),
            Some(b"third\r".to_vec()),
            Some(b"last".to_vec()),
        ];
        for buffer_bytes in [1, 3, 7, 64] {
            assert_eq!(lines(input, buffer_bytes), expected, "buffer of {buffer_bytes}");
        }
        assert!(lines(b"", 8).is_empty());
        assert_eq!(lines(b"only\n", 8), vec![Some(b"only".to_vec())]);
    }

    #[test]
    fn an_over_long_line_is_reported_without_being_buffered_and_reading_goes_on() {
        let mut input = vec![b'x'; LINE_BYTES_MAX + 10];
        input.extend_from_slice(b"\nnext\n");
        input.extend(vec![b'y'; LINE_BYTES_MAX + 1]);
        let seen = lines(&input, 4096);
        assert_eq!(seen, vec![None, Some(b"next".to_vec()), None]);
        let mut exact = vec![b'z'; LINE_BYTES_MAX];
        exact.push(b'\n');
        assert_eq!(lines(&exact, 4096), vec![Some(vec![b'z'; LINE_BYTES_MAX])]);
    }
}
