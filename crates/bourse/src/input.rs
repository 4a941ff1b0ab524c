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

/// Calls `each_line` with every line of `reader`, without its `\n`.
pub fn for_each_line(
    reader: &mut dyn BufRead,
    mut each_line: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        let read =
            reader.read_until(b'\n', &mut line).map_err(|error| format!("read error: {error}"))?;
        if read == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        each_line(&line)?;
    }
}
