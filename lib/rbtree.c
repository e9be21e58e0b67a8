/*
 * rbtree.c - red-black tree rebalancing with optional augmentation (see rbtree.h).
 *
 * Classic CLRS algorithms on nodes with parent pointers and no sentinel. Augmented
 * values are kept right by three rules: a rotation recomputes the node that went down,
 * then the node that came up; an insertion recomputes the path from the new leaf up;
 * an erasure recomputes the whole path from the lowest structurally changed node up
 * (two places change when a successor is moved, and the second is an ancestor of the first).
 */
#include "rbtree.h"

/* Rotations and fixups are inlined into each entry point so the plain tree's copies have
 * the augmentation tests folded away. */
#define RB_INLINE static inline __attribute__((always_inline))

static void replace_child(struct rb_root *root, struct rb_node *parent, struct rb_node *old,
			  struct rb_node *new)
{
	if (!parent)
		root->node = new;
	else if (parent->left == old)
		parent->left = new;
	else
		parent->right = new;
}

RB_INLINE void rotate_left(struct rb_root *root, struct rb_node *x, const struct rb_augment *aug)
{
	struct rb_node *y = x->right;

	x->right = y->left;
	if (y->left)
		rb_set_parent(y->left, x);
	rb_set_parent(y, rb_parent(x));
	replace_child(root, rb_parent(x), x, y);
	y->left = x;
	rb_set_parent(x, y);
	if (aug) {
		aug->update(x);
		aug->update(y);
	}
}

RB_INLINE void rotate_right(struct rb_root *root, struct rb_node *x, const struct rb_augment *aug)
{
	struct rb_node *y = x->left;

	x->left = y->right;
	if (y->right)
		rb_set_parent(y->right, x);
	rb_set_parent(y, rb_parent(x));
	replace_child(root, rb_parent(x), x, y);
	y->right = x;
	rb_set_parent(x, y);
	if (aug) {
		aug->update(x);
		aug->update(y);
	}
}

static inline bool is_red(const struct rb_node *n)
{
	return n && rb_red(n);
}

void rb_propagate(struct rb_node *node, const struct rb_augment *aug)
{
	while (node && aug->update(node))
		node = rb_parent(node);
}

RB_INLINE void insert_fixup(struct rb_root *root, struct rb_node *z, const struct rb_augment *aug)
{
	if (aug) {
		aug->update(z);
		rb_propagate(rb_parent(z), aug);
	}
	while (is_red(rb_parent(z))) {
		struct rb_node *p = rb_parent(z), *g = rb_parent(p), *u;

		/* a red parent is never the root, so g exists */
		if (p == g->left) {
			u = g->right;
			if (is_red(u)) {
				rb_set_red(p, false);
				rb_set_red(u, false);
				rb_set_red(g, true);
				z = g;
				continue;
			}
			if (z == p->right) {
				rotate_left(root, p, aug);
				z = p;
				p = rb_parent(z);
			}
			rb_set_red(p, false);
			rb_set_red(g, true);
			rotate_right(root, g, aug);
		} else {
			u = g->left;
			if (is_red(u)) {
				rb_set_red(p, false);
				rb_set_red(u, false);
				rb_set_red(g, true);
				z = g;
				continue;
			}
			if (z == p->left) {
				rotate_right(root, p, aug);
				z = p;
				p = rb_parent(z);
			}
			rb_set_red(p, false);
			rb_set_red(g, true);
			rotate_left(root, g, aug);
		}
	}
	rb_set_red(root->node, false);
}

/* The plain (busy) tree's copy has aug folded away: no callback tests in the rotations. */
void rb_insert_fixup(struct rb_root *root, struct rb_node *z, const struct rb_augment *aug)
{
	if (aug)
		insert_fixup(root, z, aug);
	else
		insert_fixup(root, z, NULL);
}

/* Restore the black height after removing a black node; x (maybe NULL) is the child that
 * took its place, parent its parent. */
RB_INLINE void erase_fixup(struct rb_root *root, struct rb_node *x, struct rb_node *parent,
			   const struct rb_augment *aug)
{
	while (x != root->node && !is_red(x)) {
		struct rb_node *w;

		if (x == parent->left) {
			w = parent->right;
			if (rb_red(w)) {
				rb_set_red(w, false);
				rb_set_red(parent, true);
				rotate_left(root, parent, aug);
				w = parent->right;
			}
			if (!is_red(w->left) && !is_red(w->right)) {
				rb_set_red(w, true);
				x = parent;
				parent = rb_parent(x);
				continue;
			}
			if (!is_red(w->right)) {
				rb_set_red(w->left, false);
				rb_set_red(w, true);
				rotate_right(root, w, aug);
				w = parent->right;
			}
			rb_set_red(w, rb_red(parent));
			rb_set_red(parent, false);
			rb_set_red(w->right, false);
			rotate_left(root, parent, aug);
		} else {
			w = parent->left;
			if (rb_red(w)) {
				rb_set_red(w, false);
				rb_set_red(parent, true);
				rotate_right(root, parent, aug);
				w = parent->left;
			}
			if (!is_red(w->left) && !is_red(w->right)) {
				rb_set_red(w, true);
				x = parent;
				parent = rb_parent(x);
				continue;
			}
			if (!is_red(w->left)) {
				rb_set_red(w->right, false);
				rb_set_red(w, true);
				rotate_left(root, w, aug);
				w = parent->left;
			}
			rb_set_red(w, rb_red(parent));
			rb_set_red(parent, false);
			rb_set_red(w->left, false);
			rotate_right(root, parent, aug);
		}
		x = root->node;
		break;
	}
	if (x)
		rb_set_red(x, false);
}

/* Whether erase finds the removed node's in-order successor (a constant at every call, so
 * each inlined copy keeps only its own branch). */
enum erase_next { ERASE_ONLY, ERASE_FIND_NEXT };

/* Unlink z and rebalance. With ERASE_FIND_NEXT, returns z's in-order successor: the node
 * moved into z's place, the lowest of z's right subtree, or else found by walking up first. */
RB_INLINE struct rb_node *erase(struct rb_root *root, struct rb_node *z,
				const struct rb_augment *aug, enum erase_next mode)
{
	const bool want_next = mode == ERASE_FIND_NEXT;
	struct rb_node *child, *parent, *next = NULL, *moved = NULL;
	bool removed_red;

	if (!z->left || !z->right) {
		if (want_next && z->right)
			for (next = z->right; next->left; next = next->left)
				;
		else if (want_next)
			next = rb_next(z);
		child = z->left ? z->left : z->right;
		parent = rb_parent(z);
		removed_red = rb_red(z);
		if (child)
			rb_set_parent(child, parent);
		replace_child(root, parent, z, child);
	} else {
		struct rb_node *y = z->right;

		while (y->left)
			y = y->left;
		next = y;
		moved = y;
		removed_red = rb_red(y);
		child = y->right;
		if (rb_parent(y) == z) {
			parent = y;
		} else {
			parent = rb_parent(y);
			parent->left = child;
			if (child)
				rb_set_parent(child, parent);
			y->right = z->right;
			rb_set_parent(y->right, y);
		}
		rb_set_parent(y, rb_parent(z));
		replace_child(root, rb_parent(z), z, y);
		y->left = z->left;
		rb_set_parent(y->left, y);
		rb_set_red(y, rb_red(z));
	}
	if (aug) {
		/* every node from parent up to the one moved into z's place lost it from its
		 * subtree, and the moved one's own block changed: those recomputed; above, only a
		 * changed subtree maximum goes further up */
		if (moved) {
			struct rb_node *n;

			for (n = parent; n != moved; n = rb_parent(n))
				aug->update(n);
			aug->update(moved);
			rb_propagate(rb_parent(moved), aug);
		} else {
			rb_propagate(parent, aug);
		}
	}
	if (!removed_red)
		erase_fixup(root, child, parent, aug);
	return next;
}

void rb_erase(struct rb_root *root, struct rb_node *z, const struct rb_augment *aug)
{
	if (aug)
		erase(root, z, aug, ERASE_ONLY);
	else
		erase(root, z, NULL, ERASE_ONLY);
}

struct rb_node *rb_erase_next(struct rb_root *root, struct rb_node *z)
{
	return erase(root, z, NULL, ERASE_FIND_NEXT);
}

struct rb_node *rb_first(const struct rb_root *root)
{
	struct rb_node *n = root->node;

	if (!n)
		return NULL;
	while (n->left)
		n = n->left;
	return n;
}

struct rb_node *rb_last(const struct rb_root *root)
{
	struct rb_node *n = root->node;

	if (!n)
		return NULL;
	while (n->right)
		n = n->right;
	return n;
}

struct rb_node *rb_next(const struct rb_node *n)
{
	const struct rb_node *p;

	if (n->right) {
		n = n->right;
		while (n->left)
			n = n->left;
		return (struct rb_node *)n;
	}
	while ((p = rb_parent(n)) && n == p->right)
		n = p;
	return (struct rb_node *)p;
}

struct rb_node *rb_prev(const struct rb_node *n)
{
	const struct rb_node *p;

	if (n->left) {
		n = n->left;
		while (n->right)
			n = n->right;
		return (struct rb_node *)n;
	}
	while ((p = rb_parent(n)) && n == p->left)
		n = p;
	return (struct rb_node *)p;
}

int rb_validate(const struct rb_node *n, const struct rb_node *parent, const char **why)
{
	int lh, rh;

	if (!n)
		return 1;
	if (rb_parent(n) != parent) {
		*why = "a node's parent pointer is wrong";
		return -1;
	}
	if (rb_red(n) && (is_red(n->left) || is_red(n->right))) {
		*why = "a red node has a red child";
		return -1;
	}
	lh = rb_validate(n->left, n, why);
	if (lh < 0)
		return -1;
	rh = rb_validate(n->right, n, why);
	if (rh < 0)
		return -1;
	if (lh != rh) {
		*why = "black heights differ between two subtrees";
		return -1;
	}
	return lh + !rb_red(n);
}
