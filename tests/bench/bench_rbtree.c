/*
 * bench_rbtree.c - textbook red-black tree (insert/erase fix-ups with NULL leaves).
 */
#include "bench_rbtree.h"

static void set_child(struct bench_rb_root *root, struct bench_rb_node *parent,
		      struct bench_rb_node *old, struct bench_rb_node *new)
{
	if (!parent)
		root->node = new;
	else if (parent->left == old)
		parent->left = new;
	else
		parent->right = new;
}

static void rotate_left(struct bench_rb_root *root, struct bench_rb_node *x)
{
	struct bench_rb_node *y = x->right;

	x->right = y->left;
	if (y->left)
		y->left->parent = x;
	y->parent = x->parent;
	set_child(root, x->parent, x, y);
	y->left = x;
	x->parent = y;
}

static void rotate_right(struct bench_rb_root *root, struct bench_rb_node *x)
{
	struct bench_rb_node *y = x->left;

	x->left = y->right;
	if (y->right)
		y->right->parent = x;
	y->parent = x->parent;
	set_child(root, x->parent, x, y);
	y->right = x;
	x->parent = y;
}

static bool is_red(const struct bench_rb_node *n)
{
	return n && n->red;
}

void bench_rb_insert(struct bench_rb_root *root, struct bench_rb_node *parent,
		     struct bench_rb_node **link, struct bench_rb_node *node)
{
	struct bench_rb_node *p, *g, *u;

	node->parent = parent;
	node->left = node->right = NULL;
	node->red = true;
	*link = node;

	while ((p = node->parent) && p->red) {
		g = p->parent; /* exists: a red node is never the root */
		if (p == g->left) {
			u = g->right;
			if (is_red(u)) {
				p->red = u->red = false;
				g->red = true;
				node = g;
				continue;
			}
			if (node == p->right) {
				rotate_left(root, p);
				node = p;
				p = node->parent;
			}
			p->red = false;
			g->red = true;
			rotate_right(root, g);
		} else {
			u = g->left;
			if (is_red(u)) {
				p->red = u->red = false;
				g->red = true;
				node = g;
				continue;
			}
			if (node == p->left) {
				rotate_right(root, p);
				node = p;
				p = node->parent;
			}
			p->red = false;
			g->red = true;
			rotate_left(root, g);
		}
	}
	root->node->red = false;
}

static void transplant(struct bench_rb_root *root, struct bench_rb_node *u, struct bench_rb_node *v)
{
	set_child(root, u->parent, u, v);
	if (v)
		v->parent = u->parent;
}

static void erase_fixup(struct bench_rb_root *root, struct bench_rb_node *x,
			struct bench_rb_node *xp)
{
	struct bench_rb_node *w;

	while (x != root->node && !is_red(x)) {
		if (x == xp->left) {
			w = xp->right;
			if (w->red) {
				w->red = false;
				xp->red = true;
				rotate_left(root, xp);
				w = xp->right;
			}
			if (!is_red(w->left) && !is_red(w->right)) {
				w->red = true;
				x = xp;
				xp = x->parent;
			} else {
				if (!is_red(w->right)) {
					w->left->red = false;
					w->red = true;
					rotate_right(root, w);
					w = xp->right;
				}
				w->red = xp->red;
				xp->red = false;
				w->right->red = false;
				rotate_left(root, xp);
				x = root->node;
				xp = NULL;
			}
		} else {
			w = xp->left;
			if (w->red) {
				w->red = false;
				xp->red = true;
				rotate_right(root, xp);
				w = xp->left;
			}
			if (!is_red(w->left) && !is_red(w->right)) {
				w->red = true;
				x = xp;
				xp = x->parent;
			} else {
				if (!is_red(w->left)) {
					w->right->red = false;
					w->red = true;
					rotate_left(root, w);
					w = xp->left;
				}
				w->red = xp->red;
				xp->red = false;
				w->left->red = false;
				rotate_right(root, xp);
				x = root->node;
				xp = NULL;
			}
		}
	}
	if (x)
		x->red = false;
}

void bench_rb_erase(struct bench_rb_root *root, struct bench_rb_node *z)
{
	struct bench_rb_node *x, *xp, *y;
	bool removed_red;

	if (!z->left || !z->right) {
		x = z->left ? z->left : z->right;
		xp = z->parent;
		removed_red = z->red;
		transplant(root, z, x);
	} else {
		y = z->right;
		while (y->left)
			y = y->left;
		removed_red = y->red;
		x = y->right;
		if (y->parent == z) {
			xp = y;
		} else {
			xp = y->parent;
			transplant(root, y, y->right);
			y->right = z->right;
			y->right->parent = y;
		}
		transplant(root, z, y);
		y->left = z->left;
		y->left->parent = y;
		y->red = z->red;
	}
	if (!removed_red)
		erase_fixup(root, x, xp);
}

struct bench_rb_node *bench_rb_first(const struct bench_rb_root *root)
{
	struct bench_rb_node *n = root->node;

	if (!n)
		return NULL;
	while (n->left)
		n = n->left;
	return n;
}

struct bench_rb_node *bench_rb_last(const struct bench_rb_root *root)
{
	struct bench_rb_node *n = root->node;

	if (!n)
		return NULL;
	while (n->right)
		n = n->right;
	return n;
}

struct bench_rb_node *bench_rb_next(const struct bench_rb_node *n)
{
	const struct bench_rb_node *p;

	if (n->right) {
		n = n->right;
		while (n->left)
			n = n->left;
		return (struct bench_rb_node *)n;
	}
	while ((p = n->parent) && n == p->right)
		n = p;
	return (struct bench_rb_node *)p;
}

struct bench_rb_node *bench_rb_prev(const struct bench_rb_node *n)
{
	const struct bench_rb_node *p;

	if (n->left) {
		n = n->left;
		while (n->right)
			n = n->right;
		return (struct bench_rb_node *)n;
	}
	while ((p = n->parent) && n == p->left)
		n = p;
	return (struct bench_rb_node *)p;
}

/* Returns the black height of the subtree, or -1 if it breaks a rule. */
static int check_subtree(const struct bench_rb_node *n, const struct bench_rb_node *parent)
{
	int lh, rh;

	if (!n)
		return 1;
	if (n->parent != parent)
		return -1;
	if (n->red && (is_red(n->left) || is_red(n->right)))
		return -1;
	lh = check_subtree(n->left, n);
	rh = check_subtree(n->right, n);
	if (lh < 0 || rh < 0 || lh != rh)
		return -1;
	return lh + (n->red ? 0 : 1);
}

int bench_rb_check(const struct bench_rb_root *root)
{
	if (is_red(root->node))
		return -1;
	return check_subtree(root->node, NULL) < 0 ? -1 : 0;
}
