//! The marks a recovery scan looks for in every block it passes over: `assistant` and the `\u`
//! escape, without one of which no line can qualify (`may_qualify`). Found in one forward pass
//! where the CPU has AVX-512 (BW), else with `memchr`'s searchers, one pass per mark.
//!
//! Measured on an Intel Xeon host (family 6, model 167) with the bench's session text, 128 KiB
//! blocks copied out of a buffer and searched: ~32 µs a MiB for the one pass against ~58 µs for
//! the two `memchr` passes (the copy itself ~20 µs, a plain `memchr` of LF ~23 µs). A one-pass
//! AVX2 form gained only ~15% there and was slower on the AMD host of the ninth round (README), so
//! CPUs without AVX-512 keep `memchr`.

use memchr::memmem::Finder;
use std::sync::LazyLock;

/// The marks themselves.
const ASSISTANT_MARK: &[u8] = b"assistant";
const ESCAPE_MARK: &[u8] = b"\\u";

pub static ASSISTANT: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(ASSISTANT_MARK));
pub static ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(ESCAPE_MARK));

/// Where every mark in `hay` starts, ascending (a mark counts only if it lies wholly in `hay`).
pub fn find(hay: &[u8]) -> Vec<usize> {
    one_pass(hay).unwrap_or_else(|| find_with_memchr(hay))
}

/// Whether `hay` holds a mark (`memchr`'s searchers stop at the first one found).
pub fn any(hay: &[u8]) -> bool {
    match one_pass(hay) {
        Some(at) => !at.is_empty(),
        None => ASSISTANT.find(hay).is_some() || ESCAPE.find(hay).is_some(),
    }
}

/// [`find`] in one pass where the CPU has AVX-512 BW (std detects it once), else None.
fn one_pass(hay: &[u8]) -> Option<Vec<usize>> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            let mut at = Vec::new();
            // SAFETY: the CPU has AVX-512 F and BW (BW implies F), checked just above.
            unsafe { avx512::find(hay, &mut at) };
            return Some(at);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = hay; // no one-pass form here
    None
}

/// [`find`] with one `memchr` pass per mark.
fn find_with_memchr(hay: &[u8]) -> Vec<usize> {
    let mut at: Vec<usize> = [&*ASSISTANT, &*ESCAPE]
        .into_iter()
        .flat_map(|f| f.find_iter(hay))
        .collect();
    at.sort_unstable();
    at
}

/// Whether a mark starts at `j`.
#[inline(always)]
fn starts_mark(hay: &[u8], j: usize) -> bool {
    let rest = &hay[j..];
    rest.starts_with(ASSISTANT_MARK) || rest.starts_with(ESCAPE_MARK)
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::starts_mark;
    use std::arch::x86_64::*;

    /// The candidates among the 64 positions from `p`: `a` there with `t` 8 bytes on (the
    /// first and last letters of `assistant`), or a backslash with `u` next. A byte of
    /// `(x ^ c1) | (y ^ c2)` is zero exactly where both match; the minimum of the two forms is
    /// zero where either does.
    ///
    /// # Safety
    /// The 72 bytes from `p` must be readable (the loads are unaligned), and the CPU must support
    /// AVX-512 F and BW.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn candidates(p: *const u8, k: &[__m512i; 4]) -> u64 {
        // SAFETY: the caller vouches for the 72 bytes from `p`.
        unsafe {
            let v0 = _mm512_loadu_si512(p.cast());
            let v1 = _mm512_loadu_si512(p.add(1).cast());
            let v8 = _mm512_loadu_si512(p.add(8).cast());
            // 0xBE: (A ^ B) | C.
            let t1 = _mm512_ternarylogic_epi32::<0xBE>(v0, k[0], _mm512_xor_si512(v8, k[1]));
            let t2 = _mm512_ternarylogic_epi32::<0xBE>(v0, k[2], _mm512_xor_si512(v1, k[3]));
            let z = _mm512_min_epu8(t1, t2);
            _mm512_testn_epi8_mask(z, z)
        }
    }

    /// Push the marks among the candidates `m` of the positions from `base`.
    #[inline(always)]
    fn confirm(hay: &[u8], base: usize, mut m: u64, at: &mut Vec<usize>) {
        while m != 0 {
            let j = base + m.trailing_zeros() as usize;
            if starts_mark(hay, j) {
                at.push(j);
            }
            m &= m - 1;
        }
    }

    /// [`super::find`] in one pass, 128 bytes a step; the last < 136 bytes one by one.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F and BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub unsafe fn find(hay: &[u8], at: &mut Vec<usize>) {
        let k = [
            _mm512_set1_epi8(b'a' as i8),
            _mm512_set1_epi8(b't' as i8),
            _mm512_set1_epi8(b'\\' as i8),
            _mm512_set1_epi8(b'u' as i8),
        ];
        let p = hay.as_ptr();
        let mut i = 0;
        while i + 136 <= hay.len() {
            // SAFETY: both steps read at most the 136 bytes from `i`, which `hay` holds.
            let (m0, m1) = unsafe { (candidates(p.add(i), &k), candidates(p.add(i + 64), &k)) };
            if m0 | m1 != 0 {
                confirm(hay, i, m0, at);
                confirm(hay, i + 64, m1, at);
            }
            i += 128;
        }
        while i < hay.len() {
            if starts_mark(hay, i) {
                at.push(i);
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Haystacks made of the marks' own bytes (so that partial marks abound), at every length
    /// up to a few SIMD steps, plus marks planted across the 64- and 128-byte step edges.
    fn haystacks() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut seed = 0x5eed_u64;
        for len in (0..700).chain([4096, 65_537]) {
            let mut v = vec![0u8; len];
            for b in v.iter_mut() {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                *b = b"asst\\uni\n\"x"[(seed >> 33) as usize % 11];
            }
            out.push(v);
        }
        for edge in [56, 62, 63, 64, 120, 127, 128, 129, 135, 136] {
            for mark in [ASSISTANT_MARK, ESCAPE_MARK] {
                let mut v = vec![b'x'; 300];
                v[edge..edge + mark.len()].copy_from_slice(mark);
                out.push(v.clone());
                v.truncate(edge + mark.len());
                out.push(v.clone());
                v.pop(); // a mark cut short by the end
                out.push(v);
            }
        }
        out
    }

    #[test]
    fn one_pass_finds_what_memchr_finds() {
        #[cfg(target_arch = "x86_64")]
        if !std::arch::is_x86_feature_detected!("avx512bw") {
            eprintln!("no AVX-512 BW here: find() is the memchr form itself");
        }
        for hay in haystacks() {
            let expected = find_with_memchr(&hay);
            assert_eq!(find(&hay), expected, "{:?}", String::from_utf8_lossy(&hay));
            assert_eq!(any(&hay), !expected.is_empty());
        }
    }
}
