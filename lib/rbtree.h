/*
 * rbtree.h - an intrusive red-black tree with optional augmentation.
 *
 * Written for libvaspace in the spirit of the kernel's rbtree_augmented.h: the caller
 * embeds a struct rb_node, searches and links a new node itself (rb_link), then asks
 * the tree to rebalance. An augmented tree passes an rb_augment whose update() recomputes
 * one node's cached value from the node and its two children; the tree calls it after
 * every rotation and along the path from a changed node to the root.
 */
#ifndef VA_RBTREE_H
#define VA_RBTREE_H

#include <stdbool.h>
#include <stddef.h>

struct rb_node {
	struct rb_node *parent, *left, *right;
	bool red;
};

struct rb_root {
	struct rb_node *node;
};

/* Augmentation callbacks; update() returns true if the node's cached value changed. */
struct rb_augment {
	bool (*update)(struct rb_node *node);
};

#define rb_entry(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Put node at *link (a NULL child pointer of parent, or &root->node) as a red leaf. */
static inline void rb_link(struct rb_node *node, struct rb_node *parent, struct rb_node **link)
{
	node->parent = parent;
	node->left = node->right = NULL;
	node->red = true;
	*link = node;
}

/* Rebalance after rb_link; with aug, also fix the cached values from node up to the root. */
void rb_insert_fixup(struct rb_root *root, struct rb_node *node, const struct rb_augment *aug);

/* Remove node and rebalance; with aug, the cached values stay correct. */
void rb_erase(struct rb_root *root, struct rb_node *node, const struct rb_augment *aug);

/* Remove node from a tree without augmentation and rebalance; returns node's in-order
 * successor (NULL if it was the last), found during the removal when it can be. */
struct rb_node *rb_erase_next(struct rb_root *root, struct rb_node *node);

/* Recompute cached values from node up to the root, stopping early when one is unchanged. */
void rb_propagate(struct rb_node *node, const struct rb_augment *aug);

/* Lowest node, or NULL. */
struct rb_node *rb_first(const struct rb_root *root);

/* Highest node, or NULL. */
struct rb_node *rb_last(const struct rb_root *root);

/* In-order successor, or NULL. */
struct rb_node *rb_next(const struct rb_node *node);

/* In-order predecessor, or NULL. */
struct rb_node *rb_prev(const struct rb_node *node);

/* Black height of a valid subtree, or -1 if colours, parent links or black heights are
 * broken anywhere in it (why is written to *why). */
int rb_validate(const struct rb_node *node, const struct rb_node *parent, const char **why);

#endif
