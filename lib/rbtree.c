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
		y->left->parent = x;
	y->parent = x->parent;
	replace_child(root, x->parent, x, y);
	y->left = x;
	x->parent = y;
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
		y->right->parent = x;
	y->parent = x->parent;
	replace_child(root, x->parent, x, y);
	y->right = x;
	x->parent = y;
	if (aug) {
		aug->update(x);
		aug->update(y);
	}
}

static inline bool is_red(const struct rb_node *n)
{
	return n && n->red;
}

void rb_propagate(struct rb_node *node, const struct rb_augment *aug)
{
	while (node && aug->update(node))
		node = node->parent;
}

static void propagate_full(struct rb_node *node, const struct rb_augment *aug)
{
	for (; node; node = node->parent)
		aug->update(node);
}

RB_INLINE void insert_fixup(struct rb_root *root, struct rb_node *z, const struct rb_augment *aug)
{
	if (aug) {
		aug->update(z);
		rb_propagate(z->parent, aug);
	}
	while (is_red(z->parent)) {
		struct rb_node *p = z->parent, *g = p->parent, *u;

		/* a red parent is never the root, so g exists */
		if (p == g->left) {
			u = g->right;
			if (is_red(u)) {
				p->red = false;
				u->red = false;
				g->red = true;
				z = g;
				continue;
			}
			if (z == p->right) {
				rotate_left(root, p, aug);
				z = p;
				p = z->parent;
			}
			p->red = false;
			g->red = true;
			rotate_right(root, g, aug);
		} else {
			u = g->left;
			if (is_red(u)) {
				p->red = false;
				u->red = false;
				g->red = true;
				z = g;
				continue;
			}
			if (z == p->left) {
				rotate_right(root, p, aug);
				z = p;
				p = z->parent;
			}
			p->red = false;
			g->red = true;
			rotate_left(root, g, aug);
		}
	}
	root->node->red = false;
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
			if (w->red) {
				w->red = false;
				parent->red = true;
				rotate_left(root, parent, aug);
				w = parent->right;
			}
			if (!is_red(w->left) && !is_red(w->right)) {
				w->red = true;
				x = parent;
				parent = x->parent;
				continue;
			}
			if (!is_red(w->right)) {
				w->left->red = false;
				w->red = true;
				rotate_right(root, w, aug);
				w = parent->right;
			}
			w->red = parent->red;
			parent->red = false;
			w->right->red = false;
			rotate_left(root, parent, aug);
		} else {
			w = parent->left;
			if (w->red) {
				w->red = false;
				parent->red = true;
				rotate_right(root, parent, aug);
				w = parent->left;
			}
			if (!is_red(w->left) && !is_red(w->right)) {
				w->red = true;
				x = parent;
				parent = x->parent;
				continue;
			}
			if (!is_red(w->left)) {
				w->right->red = false;
				w->red = true;
				rotate_left(root, w, aug);
				w = parent->left;
			}
			w->red = parent->red;
			parent->red = false;
			w->left->red = false;
			rotate_right(root, parent, aug);
		}
		x = root->node;
		break;
	}
	if (x)
		x->red = false;
}

/* Unlink z and rebalance. With want_next, returns z's in-order successor: the node moved
 * into z's place, the lowest of z's right subtree, or else found by walking up first. */
RB_INLINE struct rb_node *erase(struct rb_root *root, struct rb_node *z,
				const struct rb_augment *aug, bool want_next)
{
	struct rb_node *child, *parent, *next = NULL;
	bool removed_red;

	if (!z->left || !z->right) {
		if (want_next && z->right)
			for (next = z->right; next->left; next = next->left)
				;
		else if (want_next)
			next = rb_next(z);
		child = z->left ? z->left : z->right;
		parent = z->parent;
		removed_red = z->red;
		if (child)
			child->parent = parent;
		replace_child(root, parent, z, child);
	} else {
		struct rb_node *y = z->right;

		while (y->left)
			y = y->left;
		next = y;
		removed_red = y->red;
		child = y->right;
		if (y->parent == z) {
			parent = y;
		} else {
			parent = y->parent;
			parent->left = child;
			if (child)
				child->parent = parent;
			y->right = z->right;
			y->right->parent = y;
		}
		y->parent = z->parent;
		replace_child(root, z->parent, z, y);
		y->left = z->left;
		y->left->parent = y;
		y->red = z->red;
	}
	if (aug)
		propagate_full(parent, aug);
	if (!removed_red)
		erase_fixup(root, child, parent, aug);
	return next;
}

void rb_erase(struct rb_root *root, struct rb_node *z, const struct rb_augment *aug)
{
	if (aug)
		erase(root, z, aug, false);
	else
		erase(root, z, NULL, false);
}

struct rb_node *rb_erase_next(struct rb_root *root, struct rb_node *z)
{
	return erase(root, z, NULL, true);
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
	while ((p = n->parent) && n == p->right)
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
	while ((p = n->parent) && n == p->left)
		n = p;
	return (struct rb_node *)p;
}

int rb_validate(const struct rb_node *n, const struct rb_node *parent, const char **why)
{
	int lh, rh;

	if (!n)
		return 1;
	if (n->parent != parent) {
		*why = "a node's parent pointer is wrong";
		return -1;
	}
	if (n->red && (is_red(n->left) || is_red(n->right))) {
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
	return lh + !n->red;
}
