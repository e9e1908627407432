//! K-nomial tree arithmetic over positions in a group, rooted anywhere. Pure.

/// Parent and children of `me` in a radix-`k` k-nomial tree over `n` members rooted at
/// `root`. Children come in the order a broadcast sends to them: largest subtree first.
pub fn knomial(me: usize, root: usize, n: usize, k: usize) -> (Option<usize>, Vec<usize>) {
    debug_assert!(k >= 2 && me < n && root < n);
    let v = (me + n - root) % n;
    let abs = |rel: usize| (rel + root) % n;
    let mut mask = 1usize;
    let mut parent = None;
    while mask < n {
        let digit = (v / mask) % k;
        if digit != 0 {
            parent = Some(abs(v - digit * mask));
            break;
        }
        mask = mask.saturating_mul(k);
    }
    let mut children = Vec::new();
    let mut m = mask / k;
    while m >= 1 {
        for j in 1..k {
            let c = v + j * m;
            if c < n {
                children.push(abs(c));
            }
        }
        m /= k;
    }
    (parent, children)
}

/// Parent and children of `me` in a flat tree over `n` members rooted at `root`: the root
/// talks to everyone.
pub fn flat(me: usize, root: usize, n: usize) -> (Option<usize>, Vec<usize>) {
    if me == root {
        (None, (0..n).filter(|&i| i != root).collect())
    } else {
        (Some(root), Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_is_reached_exactly_once() {
        for n in 1..40 {
            for k in 2..6 {
                for root in [0, n / 2, n - 1] {
                    let mut seen = vec![0; n];
                    for me in 0..n {
                        let (p, ch) = knomial(me, root, n, k);
                        assert_eq!(p.is_none(), me == root);
                        for c in ch {
                            seen[c] += 1;
                            assert_eq!(knomial(c, root, n, k).0, Some(me), "n={n} k={k}");
                        }
                    }
                    seen[root] += 1;
                    assert!(seen.iter().all(|&s| s == 1), "n={n} k={k} root={root}");
                }
            }
        }
    }

    #[test]
    fn binomial_shape() {
        assert_eq!(knomial(0, 0, 8, 2), (None, vec![4, 2, 1]));
        assert_eq!(knomial(6, 0, 8, 2), (Some(4), vec![7]));
        assert_eq!(knomial(5, 0, 9, 3), (Some(3), vec![]));
    }
}
