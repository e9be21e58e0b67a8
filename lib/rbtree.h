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
#include <stdint.h>

/*
 * The parent pointer and the colour share a word (the embedding object keeps nodes 16-byte
 * aligned, so a node pointer's low 4 bits are free): bit 0 is red, bits 1-3 belong to the embedding
 * object (libvaspace keeps a block's state there) and the tree never changes them.
 */
#define RB_RED	     1ul
#define RB_USER_MASK 0xeul
#define RB_LOW_MASK  0xful

struct rb_node {
	uintptr_t parent_colour;
	struct rb_node *left, *right;
};

static inline struct rb_node *rb_parent(const struct rb_node *n)
{
	return (struct rb_node *)(n->parent_colour & ~RB_LOW_MASK);
}

static inline void rb_set_parent(struct rb_node *n, struct rb_node *p)
{
	n->parent_colour = (uintptr_t)p | (n->parent_colour & RB_LOW_MASK);
}

static inline bool rb_red(const struct rb_node *n)
{
	return n->parent_colour & RB_RED;
}

static inline void rb_set_red(struct rb_node *n, bool red)
{
	n->parent_colour = (n->parent_colour & ~RB_RED) | (red ? RB_RED : 0);
}

/* The embedding object's 3 bits (0..7), kept across every tree operation. */
static inline unsigned rb_user_bits(const struct rb_node *n)
{
	return (unsigned)((n->parent_colour & RB_USER_MASK) >> 1);
}

/* Set the user bits of a node in no tree, clearing its parent and colour: a plain store,
 * where rb_set_user_bits must read the word first (a cache miss on a cold node). */
static inline void rb_init_user_bits(struct rb_node *n, unsigned v)
{
	n->parent_colour = ((uintptr_t)v << 1) & RB_USER_MASK;
}

static inline void rb_set_user_bits(struct rb_node *n, unsigned v)
{
	n->parent_colour =
	    (n->parent_colour & ~RB_USER_MASK) | (((uintptr_t)v << 1) & RB_USER_MASK);
}

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
	node->parent_colour = (uintptr_t)parent | RB_RED | (node->parent_colour & RB_USER_MASK);
	node->left = node->right = NULL;
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
