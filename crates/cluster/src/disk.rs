//! The files a node's Raft log lives in, behind the few operations the log needs, so
//! that the same log runs on the real file system (`FsDisk`) and on the simulation's
//! disk, which loses what was never synced when its node crashes (and may keep a torn
//! part of it).
//!
//! Files are named by the log (plain names, no directories). What was appended is
//! durable only after `sync` of that file; `replace` is durable and atomic on return
//! (the old content or the new, never a mix).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The operations the Raft log does on its files.
pub trait Disk {
    /// Every file's name.
    fn list(&mut self) -> io::Result<Vec<String>>;
    /// The whole file (`None`: there is none).
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>>;
    /// `len` bytes of the file from `offset` (what was appended, synced or not).
    fn read_at(&self, name: &str, offset: u64, len: usize) -> io::Result<Vec<u8>>;
    /// Appends to the file (made if missing). Not durable until `sync`.
    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// Cuts the file to `len` bytes. Not durable until `sync`.
    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()>;
    /// Makes everything appended to or cut from the file durable (`fdatasync`), and the
    /// file's existence.
    fn sync(&mut self, name: &str) -> io::Result<()>;
    /// Replaces the file with `bytes`, durably and atomically (written aside, synced,
    /// renamed over, the directory synced).
    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// Removes the file, durably.
    fn remove(&mut self, name: &str) -> io::Result<()>;
}

/// A directory of the real file system.
pub struct FsDisk {
    dir: PathBuf,
    /// The file appended to last, kept open (the log appends to one segment at a time).
    open: Option<(String, File)>,
}

impl FsDisk {
    /// The directory `dir`, made if missing.
    pub fn open(dir: &Path) -> io::Result<FsDisk> {
        std::fs::create_dir_all(dir)?;
        Ok(FsDisk { dir: dir.to_path_buf(), open: None })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }

    /// The file `name`, opened for appending (kept open until another is).
    fn appending(&mut self, name: &str) -> io::Result<&mut File> {
        let reopen = self.open.as_ref().is_none_or(|(open, _)| open != name);
        if reopen {
            let path = self.dir.join(name);
            let made = !path.exists();
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            if made {
                self.sync_dir()?;
            }
            self.open = Some((name.to_string(), file));
        }
        match &mut self.open {
            Some((_, file)) => Ok(file),
            None => Err(io::Error::other("no open file")),
        }
    }
}

impl Disk for FsDisk {
    fn list(&mut self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match File::open(self.dir.join(name)) {
            Ok(mut file) => {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                Ok(Some(bytes))
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn read_at(&self, name: &str, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let file = File::open(self.dir.join(name))?;
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, offset)?;
        Ok(bytes)
    }

    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.appending(name)?.write_all(bytes)
    }

    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()> {
        self.appending(name)?.set_len(len)
    }

    fn sync(&mut self, name: &str) -> io::Result<()> {
        self.appending(name)?.sync_data()
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        if self.open.as_ref().is_some_and(|(open, _)| open == name) {
            self.open = None;
        }
        let aside = self.dir.join(format!("{name}.new"));
        {
            let mut file = File::create(&aside)?;
            file.write_all(bytes)?;
            file.sync_all()?;
        }
        std::fs::rename(&aside, self.dir.join(name))?;
        self.sync_dir()
    }

    fn remove(&mut self, name: &str) -> io::Result<()> {
        if self.open.as_ref().is_some_and(|(open, _)| open == name) {
            self.open = None;
        }
        match std::fs::remove_file(self.dir.join(name)) {
            Ok(()) => self.sync_dir(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_truncates_replaces_and_removes() {
        let dir = tempfile::tempdir().unwrap();
        let mut disk = FsDisk::open(dir.path()).unwrap();
        assert_eq!(disk.read("a").unwrap(), None);
        disk.append("a", b"hello ").unwrap();
        disk.append("a", b"world").unwrap();
        disk.sync("a").unwrap();
        assert_eq!(disk.read("a").unwrap().as_deref(), Some(&b"hello world"[..]));
        assert_eq!(disk.read_at("a", 6, 5).unwrap(), b"world");
        assert!(disk.read_at("a", 6, 6).is_err());
        disk.truncate("a", 5).unwrap();
        disk.append("a", b"!").unwrap();
        assert_eq!(disk.read("a").unwrap().as_deref(), Some(&b"hello!"[..]));
        disk.replace("b", b"one").unwrap();
        disk.replace("b", b"two").unwrap();
        assert_eq!(disk.read("b").unwrap().as_deref(), Some(&b"two"[..]));
        assert_eq!(disk.list().unwrap(), vec!["a".to_string(), "b".to_string()]);
        disk.remove("a").unwrap();
        disk.remove("a").unwrap();
        assert_eq!(disk.list().unwrap(), vec!["b".to_string()]);
    }
}
